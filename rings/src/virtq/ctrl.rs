//! The control virtqueue of a virtio-net device (`VIRTIO_NET_F_CTRL_VQ`,
//! virtio 1.x §5.1.6.5): the driver sends one command at a time and waits
//! for the device's one-byte answer.
//!
//! A command is a chain of two descriptors: the device-readable
//! `struct virtio_net_ctrl` head (`class`, `command`) followed by the
//! command-specific data, then the device-writable `ack` byte, which the
//! device sets to `VIRTIO_NET_OK` (0) or `VIRTIO_NET_ERR` (1). Both buffers
//! sit in the queue's own DMA region, after its rings. As Linux
//! `virtnet_send_command_reply` does, the driver kicks and then polls the
//! used ring (no interrupt), here with a bounded wait.
//!
//! Nothing the device writes is trusted: the used index may move by one (the
//! one command in flight) and the used entry must name chain 0; anything
//! else stops the queue ([`VirtqStats::device_errors`], [`VirtqStats::stopped`]).
//! The ack byte is set to 0xff before the chain is posted, so a device that
//! returns the chain without writing it is seen ([`CtrlError::Refused`] with
//! `ack` 0xff), as is any value other than 0.

use super::{Used, VirtqAddrs, VirtqLayout, VirtqStats, Vring};
use crate::descring::Doorbell;
use crate::dma::{DmaMapper, PageSize};
use crate::rx::RingError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes of command-specific data one command carries (an RSS
/// configuration with a 128-entry indirection table and a 40-byte key is
/// 307).
pub const CTRL_MAX_DATA: usize = 1024;

/// `VIRTIO_NET_OK`: the device took the command.
pub const VIRTIO_NET_OK: u8 = 0;
/// `VIRTIO_NET_ERR`: the device refused the command.
pub const VIRTIO_NET_ERR: u8 = 1;

/// Offsets in the command buffer (the ring region's tail): the head and
/// data, then the ack byte in a 16-byte slot of its own.
const CMD: usize = 0;
const ACK: usize = (2 + CTRL_MAX_DATA).next_multiple_of(16);
const TAIL: usize = ACK + 16;
/// What the ack byte holds until the device writes it.
const ACK_UNWRITTEN: u8 = 0xff;

/// Why a control command did not succeed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CtrlError {
    /// More command-specific data than [`CTRL_MAX_DATA`].
    #[error("control command of {len} bytes, at most {max} fit the control queue's buffer")]
    TooLong {
        /// Bytes of data given.
        len: usize,
        /// [`CTRL_MAX_DATA`].
        max: usize,
    },
    /// The device did not return the command within the wait; the queue
    /// is stopped (the command is still the device's), reset the device.
    #[error("the device did not answer control command (class {class}, command {command}) within {waited_ms} ms")]
    Timeout {
        /// `class` of the command.
        class: u8,
        /// `command` of the command.
        command: u8,
        /// How long it waited, ms.
        waited_ms: u64,
    },
    /// The device answered something other than `VIRTIO_NET_OK`:
    /// `VIRTIO_NET_ERR` (1), or a value no device may write (0xff: it did
    /// not write the ack at all).
    #[error("the device refused control command (class {class}, command {command}): ack {ack}")]
    Refused {
        /// `class` of the command.
        class: u8,
        /// `command` of the command.
        command: u8,
        /// The ack byte.
        ack: u8,
    },
    /// The queue stopped on a device error (a used entry or index that
    /// broke the protocol, now or before) or an earlier timeout.
    #[error("the control queue stopped after a device error or timeout: reset the device")]
    Stopped,
}

/// A control virtqueue: one command in flight at a time. The driver resets
/// the device before dropping it.
pub struct VirtqCtrl<D: Doorbell> {
    ring: Vring,
    doorbell: D,
    avail_idx: u16,
    last_used: u16,
    /// `VIRTIO_F_IN_ORDER` on a split ring: each command goes on the next
    /// two descriptors of the table (ring order), not always on 0 and 1.
    in_order: bool,
    vq: VirtqStats,
}

impl<D: Doorbell> VirtqCtrl<D> {
    /// A control queue of `size` descriptors (it uses two), its region
    /// mapped with `mapper` in pages of `page`. Give [`VirtqCtrl::addrs`]
    /// to the device before DRIVER_OK.
    ///
    /// # Errors
    /// [`RingError::Dma`] when the region cannot be allocated or mapped.
    ///
    /// # Panics
    /// If `size` is not a power of two in 4..=32768.
    pub fn new(
        size: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
        doorbell: D,
    ) -> Result<Self, RingError> {
        Self::with_layout(VirtqLayout::Split, size, page, mapper, doorbell)
    }

    /// [`VirtqCtrl::new`] with the given layout (a packed queue, virtio 1.2
    /// §2.8, once `VIRTIO_F_RING_PACKED` is negotiated: any `size` in
    /// 4..=32768). On a packed ring the command is buffer id 0, and the
    /// used descriptor must carry id 0 with AVAIL and USED equal to the
    /// driver's used wrap counter; anything else stops the queue.
    ///
    /// # Errors
    /// As [`VirtqCtrl::new`].
    ///
    /// # Panics
    /// If `size` does not fit `layout` ([`VirtqLayout::fits`]).
    pub fn with_layout(
        layout: VirtqLayout,
        size: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
        doorbell: D,
    ) -> Result<Self, RingError> {
        let ring = Vring::with_tail(size, layout, 2, TAIL, page, mapper).map_err(RingError::Dma)?;
        ring.set_interrupt_flag(false);
        Ok(VirtqCtrl {
            ring,
            doorbell,
            avail_idx: 0,
            last_used: 0,
            in_order: false,
            vq: VirtqStats::default(),
        })
    }

    /// With `VIRTIO_F_IN_ORDER` negotiated (`on`): on a split ring each
    /// command takes the next two descriptors of the table, wrapping at its
    /// end (virtio 1.2 §2.7.5: with IN_ORDER the driver uses descriptors
    /// in ring order), and its used entry must name that chain's head; a
    /// packed ring is in ring order already (its command is buffer id 0).
    pub fn set_in_order(&mut self, on: bool) {
        self.in_order = on;
    }

    /// The head descriptor of the chain command number `n` takes: 0, or
    /// in order on a split ring the next pair of the table.
    fn head(&self, n: u16) -> u16 {
        match self.ring.layout() {
            VirtqLayout::Split if self.in_order => 2 * (n % (self.ring.size / 2)),
            _ => 0,
        }
    }

    /// With `VIRTIO_F_EVENT_IDX` negotiated: the avail ring's flags 0, as
    /// virtio 1.x §2.7.7.1 requires, and `used_event` away from the used
    /// index (the queue is polled; it never asks for an interrupt). Every
    /// command still kicks.
    pub fn use_event_idx(&mut self) {
        self.ring.use_event_idx(self.last_used);
        self.vq.event_idx = true;
    }

    /// Where the device finds this queue.
    pub fn addrs(&self) -> VirtqAddrs {
        self.ring.addrs()
    }

    /// Split or packed.
    pub fn layout(&self) -> VirtqLayout {
        self.ring.layout()
    }

    /// Virtqueue counters (kicks, device errors, stopped).
    pub fn virtq_stats(&self) -> VirtqStats {
        self.vq
    }

    fn put_byte(&self, off: usize, b: u8) {
        let at = self.ring.tail() + off;
        // SAFETY: `off < TAIL` (callers: CMD + 2 + CTRL_MAX_DATA <= ACK <
        // TAIL), and the region holds TAIL bytes after `tail()`.
        unsafe { self.ring.at::<u8>(at).write_volatile(b) }
    }

    fn get_byte(&self, off: usize) -> u8 {
        let at = self.ring.tail() + off;
        // SAFETY: as in `put_byte`.
        unsafe { self.ring.at::<u8>(at).read_volatile() }
    }

    /// Send one command (`class`, `command`, then `data`) and wait up to
    /// `timeout` for the device to return it, polling the used ring.
    ///
    /// # Errors
    /// [`CtrlError::TooLong`] (nothing sent); [`CtrlError::Refused`] when
    /// the ack is not `VIRTIO_NET_OK`; [`CtrlError::Timeout`] and
    /// [`CtrlError::Stopped`] (the queue is then unusable until the device
    /// is reset; a used entry that broke the protocol is counted in
    /// [`VirtqStats::device_errors`]).
    pub fn command(
        &mut self,
        class: u8,
        command: u8,
        data: &[u8],
        timeout: Duration,
    ) -> Result<(), CtrlError> {
        if self.vq.stopped {
            return Err(CtrlError::Stopped);
        }
        if data.len() > CTRL_MAX_DATA {
            return Err(CtrlError::TooLong {
                len: data.len(),
                max: CTRL_MAX_DATA,
            });
        }
        self.put_byte(CMD, class);
        self.put_byte(CMD + 1, command);
        for (i, &b) in data.iter().enumerate() {
            self.put_byte(CMD + 2 + i, b);
        }
        self.put_byte(ACK, ACK_UNWRITTEN);
        let base = self.ring.region.iova() + self.ring.tail() as u64;
        let head = self.head(self.avail_idx);
        self.ring.post_ctrl(
            self.avail_idx,
            head,
            (base + CMD as u64, 2 + data.len() as u32),
            base + ACK as u64,
        );
        let old = self.avail_idx;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.ring.publish(self.avail_idx);
        self.ring
            .kick(&mut self.doorbell, old, self.avail_idx, &mut self.vq);

        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            if self.ring.used_waiting(self.last_used, 1) {
                break;
            }
            if start.elapsed() > timeout {
                self.vq.stopped = true;
                return Err(CtrlError::Timeout {
                    class,
                    command,
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            polls += 1;
            if polls < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        // Exactly the one command's chain came back: split, the used index
        // moved by one and its entry names the chain's head; packed, the
        // descriptor at the used cursor is used and names buffer id 0.
        let one = self.ring.pending(self.last_used, 1) == 1;
        let id = match self.ring.next_used(self.last_used) {
            Used::Elem { id, .. } => Some(id),
            Used::None | Used::Bad => None,
        };
        if !one || id != Some(u32::from(head)) {
            self.vq.device_errors += 1;
            self.vq.stopped = true;
            return Err(CtrlError::Stopped);
        }
        self.ring.consume_used();
        self.last_used = self.last_used.wrapping_add(1);
        match self.get_byte(ACK) {
            VIRTIO_NET_OK => Ok(()),
            ack => Err(CtrlError::Refused {
                class,
                command,
                ack,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The command chain as the device sees it, against a device thread
    //! that answers through [`super::super::device::DeviceView`].

    use super::*;
    use crate::dma::IdentityMapper;
    use crate::virtq::device::DeviceView;
    use crate::virtq::{DESC_F_NEXT, DESC_F_WRITE};

    struct Count(Arc<std::sync::atomic::AtomicU32>);
    impl Doorbell for Count {
        fn ring(&mut self, _: u16) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn ctrl() -> VirtqCtrl<Count> {
        VirtqCtrl::new(
            64,
            PageSize::Small4K,
            Arc::new(IdentityMapper),
            Count(Arc::default()),
        )
        .unwrap()
    }

    /// Play the device for one command: wait for avail index `n`, read the
    /// chain, write `ack` (unless None) and the used entry `(id, len)` at
    /// slot `n - 1` with used index `used`. Returns the readable bytes.
    fn answer(
        v: DeviceView,
        n: u16,
        ack: Option<u8>,
        id: u32,
        used: u16,
    ) -> std::thread::JoinHandle<Vec<u8>> {
        let v = SendView(v);
        std::thread::spawn(move || {
            let v = v;
            while v.0.avail_idx() != n {
                std::hint::spin_loop();
            }
            let head = v.0.avail_entry(n - 1);
            let (a, l, f, next) = v.0.desc(head);
            assert_eq!(f, DESC_F_NEXT);
            // SAFETY: identity-mapped; the driver wrote `l` bytes there.
            let cmd =
                unsafe { std::slice::from_raw_parts(a as usize as *const u8, l as usize) }.to_vec();
            let (aa, al, af, _) = v.0.desc(next);
            assert_eq!((al, af), (1, DESC_F_WRITE));
            if let Some(ack) = ack {
                // SAFETY: identity-mapped ack byte.
                unsafe { (aa as usize as *mut u8).write_volatile(ack) };
            }
            v.0.put_used(n - 1, id, 1);
            v.0.set_used_idx(used);
            cmd
        })
    }

    struct SendView(DeviceView);
    // SAFETY: the queue outlives the thread (joined before it is dropped).
    unsafe impl Send for SendView {}

    #[test]
    fn a_command_goes_out_as_class_command_data_then_an_ack_slot() {
        let mut c = ctrl();
        // SAFETY: the queue lives until the end of the test.
        let v = unsafe { DeviceView::new(c.addrs()) };
        let dev = answer(v, 1, Some(VIRTIO_NET_OK), 0, 1);
        c.command(4, 0, &[2, 0], Duration::from_secs(5)).unwrap();
        assert_eq!(dev.join().unwrap(), vec![4, 0, 2, 0]);
        let dev = answer(v, 2, Some(VIRTIO_NET_ERR), 0, 2);
        let err = c
            .command(4, 1, &[9; 300], Duration::from_secs(5))
            .unwrap_err();
        assert_eq!(
            err,
            CtrlError::Refused {
                class: 4,
                command: 1,
                ack: VIRTIO_NET_ERR
            }
        );
        let sent = dev.join().unwrap();
        assert_eq!((sent.len(), &sent[..2]), (302, &[4u8, 1][..]));
        // An ack never written reads 0xff: refused, not taken for OK.
        let dev = answer(v, 3, None, 0, 3);
        let err = c
            .command(4, 0, &[1, 0], Duration::from_secs(5))
            .unwrap_err();
        assert!(matches!(err, CtrlError::Refused { ack: 0xff, .. }), "{err}");
        dev.join().unwrap();
        assert!(!c.virtq_stats().stopped);
        assert_eq!(
            c.command(0, 0, &[0; CTRL_MAX_DATA + 1], Duration::ZERO),
            Err(CtrlError::TooLong {
                len: CTRL_MAX_DATA + 1,
                max: CTRL_MAX_DATA
            })
        );
    }

    #[test]
    fn a_bad_used_entry_or_no_answer_stops_the_queue() {
        // A used id that is not the command's chain.
        let mut c = ctrl();
        // SAFETY: the queue lives until the end of the test.
        let v = unsafe { DeviceView::new(c.addrs()) };
        let dev = answer(v, 1, Some(VIRTIO_NET_OK), 2, 1);
        let err = c
            .command(4, 0, &[2, 0], Duration::from_secs(5))
            .unwrap_err();
        dev.join().unwrap();
        assert_eq!(err, CtrlError::Stopped);
        assert_eq!(c.virtq_stats().device_errors, 1);
        assert_eq!(
            c.command(4, 0, &[2, 0], Duration::from_secs(5)),
            Err(CtrlError::Stopped)
        );
        // A used index that moved by two.
        let mut c = ctrl();
        // SAFETY: as above.
        let v = unsafe { DeviceView::new(c.addrs()) };
        let dev = answer(v, 1, Some(VIRTIO_NET_OK), 0, 2);
        assert_eq!(
            c.command(4, 0, &[2, 0], Duration::from_secs(5)),
            Err(CtrlError::Stopped)
        );
        dev.join().unwrap();
        // No answer at all.
        let mut c = ctrl();
        let err = c
            .command(4, 0, &[2, 0], Duration::from_millis(20))
            .unwrap_err();
        assert!(
            matches!(
                err,
                CtrlError::Timeout {
                    class: 4,
                    command: 0,
                    ..
                }
            ),
            "{err}"
        );
        assert!(c.virtq_stats().stopped);
    }
}
