//! ordsim's integration tests, linked as one binary (one link and one instantiation of the engine
//! per strategy, instead of one per file). Each module is one subject.
//!
//! The binary belongs to the cli package (for `CARGO_BIN_EXE_sim`), so cargo starts it in `cli/`;
//! tests that name files of the repository call [`common::at_root`] first.

mod common;

mod check;
mod cli;
mod clustered_grouping;
mod delivery_timeout;
mod determinism;
mod docs_map;
mod explore;
mod groups;
mod ha;
mod hostile;
mod hostile3;
mod hostile4;
mod hostile5;
mod hostile6;
mod hostile_io;
mod judge;
mod kafka_leaders;
mod lease;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "live")]
mod live_consumer;
#[cfg(feature = "live")]
mod live_postgres;
#[cfg(feature = "live")]
mod live_rabbitmq;
mod log;
mod network;
mod new_partitions;
mod pause;
mod physics;
mod producer;
mod producer_batches;
mod properties;
mod rabbit_versions;
mod rebalance_protocol;
mod replication;
mod reports;
mod resend;
mod restart;
mod seed_claims;
mod semantics;
mod sqs_visibility;
mod static_membership;
mod sweep;
mod trace;
mod transactions;
mod transit;
mod zombie_producer;
