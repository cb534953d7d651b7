//! The README's tables of checks name every check, in order: the first table the
//! file-system checks, the second the executor checks, the third the store checks.

/// The check names of each table of the README (rows starting with a check name).
fn tables(readme: &str) -> Vec<Vec<&str>> {
    let mut tables: Vec<Vec<&str>> = Vec::new();
    let mut in_table = false;
    for line in readme.lines() {
        match line.strip_prefix("| `").and_then(|l| l.split('`').next()) {
            Some(name) => {
                if !in_table {
                    tables.push(Vec::new());
                }
                in_table = true;
                tables.last_mut().expect("a table was started").push(name);
            }
            None => in_table = false,
        }
    }
    tables
}

#[test]
fn the_readme_lists_every_check_in_order() {
    let tables = tables(include_str!("../README.md"));
    let names: Vec<&str> = broker_conformance::checks().iter().map(|c| c.name).collect();
    let exec_names: Vec<&str> = broker_conformance::executor_checks().iter().map(|c| c.name).collect();
    let store_names: Vec<&str> = broker_conformance::store_checks().iter().map(|c| c.name).collect();
    assert_eq!(tables, [names, exec_names, store_names]);
}
