//! Runs one seed: a cluster over the simulated store ([`crate::cluster::runner`]) or
//! one broker on the simulated disk ([`crate::one_broker`]), as the options and the
//! seed's parameters say. What a run is (options, report, bounds) is [`mod@crate::run`].

pub use crate::run::{core_config, RunOptions, RunReport, RunStats, Script, CHAOS_LIMIT_MS, LIVENESS_BOUND_MS};
use crate::swarm::SwarmParams;

/// Runs one seed to the end and checks it.
pub fn run(opts: &RunOptions) -> RunReport {
    if let Some(script) = &opts.cluster_script {
        let (params, cluster) = script.params();
        return crate::cluster::runner::run(opts, params, cluster);
    }
    let params = match (&opts.script, &opts.params) {
        (Some(script), _) => script.params(),
        (None, Some(p)) => p.clone(),
        (None, None) => SwarmParams::draw(opts.seed),
    };
    let cluster = match (&opts.script, &params.cluster, opts.nodes) {
        (Some(_), _, _) => None,
        (None, _, Some(0)) => None,
        (None, _, Some(nodes)) => crate::cluster::ClusterParams::draw(opts.seed, Some(nodes)),
        (None, cluster, None) => cluster.clone(),
    };
    if let Some(cluster) = cluster {
        let params = SwarmParams { cluster: Some(cluster.clone()), ..params };
        return crate::cluster::runner::run(opts, params, cluster);
    }
    crate::one_broker::run(opts, params)
}
