//! The kernel path's receive sockets, on raw libc calls (this is the baseline
//! being measured, so it uses exactly the interfaces named: an AF_PACKET
//! socket with a TPACKET_V3 mmap ring, and recvmmsg on a UDP socket).
//! Sources: Linux `Documentation/networking/packet_mmap.rst`, recvmmsg(2).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn check(rc: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(rc)
}

fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
    what: &str,
) -> io::Result<()> {
    // SAFETY: `val` points at a live T of the size passed; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    check(rc, what).map(|_| ())
}

fn poll_in(fd: &OwnedFd, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one valid pollfd; the result only tells us to look again.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}

/// An AF_PACKET socket bound to one interface with a TPACKET_V3 RX ring.
pub struct PacketRing {
    fd: OwnedFd,
    map: *mut u8,
    block_size: usize,
    blocks: usize,
    cur: usize,
}

// SAFETY: the mapping belongs to this value alone (the pointer is never
// shared), so moving the ring to the receiving thread is sound.
unsafe impl Send for PacketRing {}

const BLOCK_SIZE: usize = 1 << 20;
const BLOCKS: usize = 16;
const FRAME_SIZE: usize = 2048;

impl PacketRing {
    /// Open, size the ring (16 blocks of 1 MiB, retired after 10 ms), map it, bind to `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<PacketRing> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; the fd is owned right below.
        let raw = check(
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto as i32) },
            "socket(AF_PACKET)",
        )?;
        // SAFETY: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let v3 = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &v3,
            "PACKET_VERSION",
        )?;
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: BLOCKS as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (BLOCK_SIZE / FRAME_SIZE * BLOCKS) as u32,
            tp_retire_blk_tov: 10,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req,
            "PACKET_RX_RING",
        )?;
        let size = BLOCK_SIZE * BLOCKS;
        // SAFETY: a fresh shared mapping of the socket's ring, chosen by the kernel.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::other(format!(
                "mmap of the TPACKET_V3 ring: {}",
                io::Error::last_os_error()
            )));
        }
        let ring = PacketRing {
            fd,
            map: map.cast(),
            block_size: BLOCK_SIZE,
            blocks: BLOCKS,
            cur: 0,
        };
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        check(rc, "bind(AF_PACKET)")?;
        Ok(ring)
    }

    /// Hand every frame of the next ready block to `f` and return the block
    /// to the kernel; if none is ready, wait up to `timeout_ms`. Returns frames seen.
    pub fn next_block(&mut self, timeout_ms: i32, mut f: impl FnMut(&[u8])) -> usize {
        let block = self.map.wrapping_add(self.cur * self.block_size);
        let status = block.wrapping_add(8).cast::<u32>();
        // SAFETY: `status` is block_status of block `cur` inside the live mapping
        // (tpacket_block_desc: version, offset_to_priv, then bh1.block_status);
        // the kernel writes it concurrently, so read it volatile.
        if unsafe { status.read_volatile() } & libc::TP_STATUS_USER == 0 {
            poll_in(&self.fd, timeout_ms);
            return 0;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: the block is ours until we set TP_STATUS_KERNEL; the fields
        // read are u32s at fixed offsets inside it.
        let (num, first) = unsafe {
            (
                block.wrapping_add(12).cast::<u32>().read_volatile(),
                block.wrapping_add(16).cast::<u32>().read_volatile(),
            )
        };
        let mut off = first as usize;
        for _ in 0..num {
            if off + 26 > self.block_size {
                break;
            }
            let hdr = block.wrapping_add(off);
            // SAFETY: tpacket3_hdr fields at fixed offsets inside the block (checked above).
            let (next, snaplen, mac) = unsafe {
                (
                    hdr.cast::<u32>().read_unaligned(),
                    hdr.wrapping_add(12).cast::<u32>().read_unaligned(),
                    hdr.wrapping_add(24).cast::<u16>().read_unaligned(),
                )
            };
            let start = off + mac as usize;
            if start + snaplen as usize <= self.block_size {
                // SAFETY: the frame lies inside the block, which the kernel does not
                // touch until we hand it back below.
                f(unsafe {
                    std::slice::from_raw_parts(block.wrapping_add(start), snaplen as usize)
                });
            }
            if next == 0 {
                break;
            }
            off += next as usize;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: as above; writing TP_STATUS_KERNEL returns the block.
        unsafe { status.write_volatile(libc::TP_STATUS_KERNEL) };
        self.cur = (self.cur + 1) % self.blocks;
        num as usize
    }

    /// Join fanout group `group` in `PACKET_FANOUT_CPU` mode: each frame goes
    /// to the group's socket of index `cpu % members`, the CPU whose softirq
    /// received it (packet(7)). Join in the order of the CPUs.
    pub fn fanout_cpu(&self, group: u16) -> io::Result<()> {
        let val: libc::c_int =
            (group as libc::c_int) | ((libc::PACKET_FANOUT_CPU as libc::c_int) << 16);
        setsockopt(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &val,
            "PACKET_FANOUT",
        )
    }

    /// Frames the kernel dropped because the ring was full (PACKET_STATISTICS; resets on read).
    pub fn drops(&self) -> u64 {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as u32;
        // SAFETY: `st` and `len` are valid for writing; the kernel fills at most `len` bytes.
        unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        st.tp_drops as u64
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `open`; no slice into it outlives `next_block`.
        unsafe { libc::munmap(self.map.cast(), self.block_size * self.blocks) };
    }
}

/// A UDP socket read with recvmmsg, 32 datagrams per call.
pub struct UdpBatch {
    sock: std::net::UdpSocket,
    bufs: Vec<[u8; 2048]>,
}

impl UdpBatch {
    /// Bind `0.0.0.0:port` with a 16 MiB receive buffer and a 100 ms receive timeout.
    pub fn bind(port: u16) -> io::Result<UdpBatch> {
        let sock = std::net::UdpSocket::bind(("0.0.0.0", port))?;
        sock.set_read_timeout(Some(std::time::Duration::from_millis(100)))?;
        let fd = sock.try_clone()?.into();
        let size: libc::c_int = 16 << 20;
        let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &size, "SO_RCVBUF");
        Ok(UdpBatch {
            sock,
            bufs: vec![[0u8; 2048]; 32],
        })
    }

    /// One recvmmsg call: hands each datagram's payload to `f`; returns how many.
    pub fn recv_batch(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let n = self.bufs.len();
        let mut iov: Vec<libc::iovec> = self
            .bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain data; zero is a valid "no name, no control" value.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs` holds n headers whose iovecs point into `self.bufs`,
        // all alive for the call; the kernel writes at most iov_len bytes each.
        let got = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if got <= 0 {
            return 0;
        }
        for (m, b) in msgs.iter().zip(&self.bufs).take(got as usize) {
            f(&b[..(m.msg_len as usize).min(b.len())]);
        }
        got as usize
    }
}

/// `struct ethtool_ringparam` (Linux `include/uapi/linux/ethtool.h`).
#[repr(C)]
#[derive(Default)]
struct RingParam {
    cmd: u32,
    rx_max_pending: u32,
    rx_mini_max_pending: u32,
    rx_jumbo_max_pending: u32,
    tx_max_pending: u32,
    rx_pending: u32,
    rx_mini_pending: u32,
    rx_jumbo_pending: u32,
    tx_pending: u32,
}

const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// One SIOCETHTOOL call on `ifname` with the command structure `data`
/// (its first field is the ETHTOOL_* command).
fn ethtool<T>(ifname: &str, data: &mut T) -> io::Result<()> {
    // SAFETY: plain socket(2); the fd is owned at once below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    let raw = check(raw, "socket(AF_INET)")?;
    // SAFETY: `raw` is a fresh fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: an all-zero ifreq is valid (name empty, union zero).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if ifname.len() >= ifr.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: SIOCETHTOOL reads the ifreq (NUL-terminated name, data pointer)
    // and reads/writes the command structure it points at, a live `T` of the
    // layout its command expects (callers pass the matching repr(C) struct).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
    check(rc, "ioctl(SIOCETHTOOL)")?;
    Ok(())
}

/// Set the RX ring of `ifname` to `n` descriptors, as `ethtool -G <if> rx <n>`
/// does; returns the size the driver then reports (it may round).
pub fn set_rx_ring(ifname: &str, n: u32) -> io::Result<u32> {
    let mut rp = RingParam {
        cmd: ETHTOOL_GRINGPARAM,
        ..Default::default()
    };
    ethtool(ifname, &mut rp)?;
    rp.cmd = ETHTOOL_SRINGPARAM;
    rp.rx_pending = n.min(rp.rx_max_pending);
    ethtool(ifname, &mut rp)?;
    let mut now = RingParam {
        cmd: ETHTOOL_GRINGPARAM,
        ..Default::default()
    };
    ethtool(ifname, &mut now)?;
    Ok(now.rx_pending)
}

/// `struct ethtool_channels` (Linux `include/uapi/linux/ethtool.h`).
#[repr(C)]
#[derive(Default)]
struct Channels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_SCHANNELS: u32 = 0x3d;

/// Set the combined RX/TX channels (queue pairs) of `ifname` to `n`, as
/// `ethtool -L <if> combined <n>` does; returns the count before. The driver
/// resets the port when the count changes.
pub fn set_combined_channels(ifname: &str, n: u32) -> io::Result<u32> {
    let mut ch = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool(ifname, &mut ch)?;
    let before = ch.combined_count;
    if before != n {
        ch.cmd = ETHTOOL_SCHANNELS;
        ch.combined_count = n;
        ethtool(ifname, &mut ch)?;
    }
    Ok(before)
}

/// The current combined channel count of `ifname` (`ethtool -l`).
pub fn combined_channels(ifname: &str) -> io::Result<u32> {
    let mut ch = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool(ifname, &mut ch)?;
    Ok(ch.combined_count)
}

/// `struct ethtool_coalesce` (Linux `include/uapi/linux/ethtool.h`): the
/// command and 22 `__u32` fields, of which only `rx_coalesce_usecs` is set here.
#[repr(C)]
#[derive(Default)]
struct Coalesce {
    cmd: u32,
    rx_coalesce_usecs: u32,
    rest: [u32; 21],
}

const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_SCOALESCE: u32 = 0x0f;

/// `ethtool -c <if>`'s rx-usecs.
pub fn rx_usecs(ifname: &str) -> io::Result<u32> {
    let mut c = Coalesce {
        cmd: ETHTOOL_GCOALESCE,
        ..Default::default()
    };
    ethtool(ifname, &mut c)?;
    Ok(c.rx_coalesce_usecs)
}

/// `ethtool -C <if> rx-usecs <usecs>`, the other coalescing fields as they
/// were. igb: 0 = no throttling (an interrupt per packet), 1 and 3 = its
/// adaptive modes, 4 and more = an EITR interval of that many µs
/// (`igb_set_coalesce`).
pub fn set_rx_usecs(ifname: &str, usecs: u32) -> io::Result<()> {
    let mut c = Coalesce {
        cmd: ETHTOOL_GCOALESCE,
        ..Default::default()
    };
    ethtool(ifname, &mut c)?;
    c.cmd = ETHTOOL_SCOALESCE;
    c.rx_coalesce_usecs = usecs;
    ethtool(ifname, &mut c)
}

impl UdpBatch {
    /// A UDP socket for one flow: bound to `0.0.0.0:port` beside the flow's
    /// other sockets (`SO_REUSEADDR` + `SO_REUSEPORT`), connected to the
    /// flow's source `peer`, non-blocking, 4 MiB receive buffer. A connected
    /// UDP socket is the only kind RFS can steer by: the kernel saves a
    /// datagram's flow hash on the socket only when it is connected
    /// (`__udp_queue_rcv_skb`: `inet_daddr` set), and `sock_rps_record_flow`
    /// records the reading CPU only for a socket in `TCP_ESTABLISHED`, which
    /// a UDP socket is once connected. The kernel's UDP lookup prefers the
    /// connected socket of the exact 4-tuple.
    pub fn connected(port: u16, peer: std::net::SocketAddrV4) -> io::Result<UdpBatch> {
        // SAFETY: plain socket(2); the fd is owned at once below.
        let raw = check(
            unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0) },
            "socket(AF_INET, SOCK_DGRAM)",
        )?;
        // SAFETY: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one,
            "SO_REUSEADDR",
        )?;
        setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            &one,
            "SO_REUSEPORT",
        )?;
        let size: libc::c_int = 4 << 20;
        let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &size, "SO_RCVBUF");
        let addr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let local = addr(std::net::Ipv4Addr::UNSPECIFIED, port);
        // SAFETY: `local` is a valid sockaddr_in of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&local as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        check(rc, "bind(UDP)")?;
        let remote = addr(*peer.ip(), peer.port());
        // SAFETY: `remote` is a valid sockaddr_in of the size passed.
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&remote as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        check(rc, "connect(UDP)")?;
        Ok(UdpBatch {
            sock: std::net::UdpSocket::from(fd),
            bufs: vec![[0u8; 2048]; 32],
        })
    }

    /// The socket's fd, to wait on several sockets at once.
    pub fn raw_fd(&self) -> libc::c_int {
        self.sock.as_raw_fd()
    }
}

/// An AF_PACKET raw socket that only transmits (bound to one interface with
/// protocol 0, so it receives nothing), sending a batch with one
/// `sendmmsg(2)` call. Frames go through the interface's qdisc, as an
/// application's do by default (no `PACKET_QDISC_BYPASS`).
pub struct RawTx {
    fd: OwnedFd,
}

impl RawTx {
    /// Open and bind to `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<RawTx> {
        // SAFETY: plain socket(2) call; the fd is owned right below.
        let raw = check(
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) },
            "socket(AF_PACKET)",
        )?;
        // SAFETY: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        check(rc, "bind(AF_PACKET)")?;
        Ok(RawTx { fd })
    }

    /// Send `frames` (complete Ethernet frames without FCS) with one
    /// `sendmmsg`; returns how many the kernel took (0 when it took none:
    /// the qdisc or the socket's send buffer is full).
    pub fn send_batch(&self, frames: &mut [Vec<u8>]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        let mut iov: Vec<libc::iovec> = frames
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: plain data; zero is "no name, no control".
        let mut msgs: Vec<libc::mmsghdr> = (0..iov.len())
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs` holds headers whose iovecs point into `frames`, all
        // alive for the call; the kernel only reads them.
        let sent = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as u32,
                libc::MSG_DONTWAIT,
            )
        };
        sent.max(0) as usize
    }
}
