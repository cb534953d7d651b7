//! The cluster over shared storage (DESIGN.md, section 10): several nodes share one
//! store for metadata and data, coordinated only by the store's create-if-absent. The
//! simulator runs it over a simulated store, and `runtimes/cluster` over real ones.
//!
//! - [`store`]: the store contract, four operations and how each may fail;
//! - [`keys`]: where the journal, snapshots and topic objects live in the store;
//! - [`entry`]: the journal entries and their codec;
//! - [`catalog`]: the state every node folds from the journal, and the validation of
//!   creates and deletes against it;
//! - [`node`]: one node, as a state machine with the same effects-out shape as the
//!   broker: the append and the fence, the data, removal, reconciliation, compaction,
//!   and healing and deadlines, one file per rule;
//! - [`topic_object`]: the objects that hold one flush's records of any partitions of
//!   one incarnation, with every partition's end, and their codec (rule D);
//! - [`object_index`]: the topic objects' headers a node knows, and the search for the
//!   object that holds an offset;
//! - [`segment`]: the layout before topic objects, one object per partition's records,
//!   and its codec: no longer written; a node refuses a topic that has them;
//! - [`snapshot`]: the catalog as of one journal entry, and its codec (rule C);
//! - [`memstore`]: a store in memory that keeps the contract and never fails.

pub mod catalog;
pub mod entry;
mod head;
pub mod keys;
pub mod memstore;
pub mod node;
pub mod object_index;
pub mod segment;
pub mod snapshot;
pub mod store;
pub mod topic_object;
