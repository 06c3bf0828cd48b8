//! Memory the device touches: hugepage DMA regions, mempools, zero-copy packets
//! and RX/TX descriptor ring bookkeeping. (A software device that plays the
//! NIC's side of the rings, for tests and benches, is `pollnic_model::ring`.)
//!
//! The terms are DPDK's and ixy's: a *mempool* of fixed-size buffers, a
//! *burst* of packets per call, a *descriptor write-back* by the device, the
//! *tail* register (RDT/TDT) written once per burst.
//!
//! `unsafe` lives only in [`virtq`] (volatile and atomic access to split and packed virtqueues),
//! [`dma`] (mapping and raw buffer access), [`descring`]
//! (volatile descriptor access), [`mempool`] (the pool's reference count and
//! packet buffer access), [`rx`] and [`tx`] (handing buffer ownership between
//! rings and packets: the burst's `set_len`, packets rebuilt from their
//! parts) and [`simd`] (the SSE4.1 loops' `#[target_feature]` functions and
//! their loads and stores). The crate denies `unsafe_code` and allows it on
//! those seven modules only, so a new module is fenced by the compiler.

#![warn(missing_docs, unnameable_types)]
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod descring;
#[allow(unsafe_code)]
pub mod dma;
#[allow(unsafe_code)]
pub mod mempool;
#[allow(unsafe_code)]
pub mod rx;
#[allow(unsafe_code)]
pub mod simd;
#[allow(unsafe_code)]
pub mod tx;
#[allow(unsafe_code)]
pub mod virtq;

pub use descring::{DescRing, Doorbell};
pub use dma::{remove_stale_files, DmaError, DmaMapper, DmaRegion, IdentityMapper, PageSize};
pub use mempool::{Mempool, Packet, PacketTooLong, PoolCache};
pub use rx::{rx_cache_size, rx_free_thresh, RingError, RxRing, RxStats, RX_UNFINISHED_POLLS};
pub use simd::DataPath;
pub use tx::{TxRing, TxStats, TX_RS_THRESH};
pub use virtq::ctrl::{CtrlError, VirtqCtrl};
pub use virtq::{
    NetHdr, VirtqAddrs, VirtqLayout, VirtqRx, VirtqStats, VirtqTx, VIRTIO_NET_HDR_LEN,
};
