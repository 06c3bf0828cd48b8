//! Intel igb (82576, I350) bring-up, queue setup, shutdown and counters.

pub mod init;
pub mod queue;
pub mod rss;
pub mod stats;
