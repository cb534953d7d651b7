//! The cluster for real: broker-core's cluster node (`broker_core::cluster::node`, the
//! protocol of DESIGN.md section 10) over a shared store, serving Kafka clients
//! through the same front end as `broker-fs serve --kafka`.
//!
//! One process is one node ([`node_loop`]); any number of them share one store
//! ([`store`], chosen by URL). `broker-cluster serve --store URL --node-id N --kafka
//! ADDR` runs one; `broker-cluster status --store URL` says what the store holds
//! ([`status`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod node_loop;
pub mod peers;
pub mod status;
pub mod store;
