//! The README's table of checks names every check, in order.

#[test]
fn the_readme_lists_every_check_in_order() {
    let readme = include_str!("../README.md");
    let listed: Vec<&str> =
        readme.lines().filter_map(|l| l.strip_prefix("| `")).filter_map(|l| l.split('`').next()).collect();
    let names: Vec<&str> = broker_conformance::checks().iter().map(|c| c.name).collect();
    assert_eq!(listed, names);
}
