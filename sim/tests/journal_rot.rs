//! Rot in the journal: every commit is written twice, so rot in one copy loses nothing;
//! rot in both copies of one commit is beyond that redundancy, and the runner tells the
//! two apart with the disk's knowledge of what it rotted.

use broker_sim::runner::{run, RunOptions};
use broker_sim::swarm::SwarmParams;

#[test]
fn heavy_journal_rot_is_repaired_and_only_double_damage_is_excused() {
    let (mut repaired_runs, mut lost_runs, mut lost_with_consequences) = (0, 0, 0);
    for seed in 0..120 {
        let mut params = SwarmParams::draw(seed);
        params.bit_rot = 0.25;
        let r = run(&RunOptions { seed, params: Some(params), ..RunOptions::default() });
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        match r.journal_lost_to_rot {
            None => {
                assert!(r.excused.is_empty(), "seed {seed}: nothing excused without double damage");
                repaired_runs += u32::from(r.faults.rot_journal_sectors > 0);
            }
            Some(_) => {
                lost_runs += 1;
                lost_with_consequences += u32::from(!r.excused.is_empty());
            }
        }
    }
    println!("{repaired_runs} runs repaired journal rot; {lost_runs} lost a commit, {lost_with_consequences} with consequences");
    assert!(repaired_runs >= 20, "journal rot that one copy survives: {repaired_runs} runs");
    // Double damage does happen at this rate, and the checkers see what it costs.
    assert!(
        lost_runs >= 1 && lost_with_consequences >= 1,
        "{lost_runs} runs lost a commit, {lost_with_consequences} with consequences"
    );
}
