//! The AF_XDP receive socket of the `kernel-afxdp` row, over libxdp (the
//! xdp-project's AF_XDP library, Debian `libxdp1`), loaded at run time so that
//! building `compare` needs no libxdp headers and a machine without it still
//! runs every other row (this row then says what to install).
//!
//! libxdp does the setup: `xsk_umem__create` registers the UMEM and maps its
//! fill and completion rings, `xsk_socket__create` loads libxdp's default XSK
//! program (an XDP program that redirects the queue's frames into an XSKMAP),
//! attaches it and binds the socket. The rings' fast-path accessors are
//! `static inline` in `<xdp/xsk.h>`, so they are written here against the
//! ring layout that header defines (`struct xsk_ring_prod`/`xsk_ring_cons`)
//! and the barriers it documents (acquire on the peer's index, release on
//! ours; Linux `net/xdp/xsk_queue.h`). Sources: Linux
//! `Documentation/networking/af_xdp.rst`, libxdp `xsk.h` 1.3.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

/// The ring bookkeeping libxdp fills in (`DEFINE_XSK_RING` in `<xdp/xsk.h>`).
#[repr(C)]
struct XskRing {
    cached_prod: u32,
    cached_cons: u32,
    mask: u32,
    size: u32,
    producer: *mut u32,
    consumer: *mut u32,
    ring: *mut c_void,
    flags: *mut u32,
}

impl XskRing {
    fn empty() -> Box<XskRing> {
        Box::new(XskRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: 0,
            size: 0,
            producer: std::ptr::null_mut(),
            consumer: std::ptr::null_mut(),
            ring: std::ptr::null_mut(),
            flags: std::ptr::null_mut(),
        })
    }
}

/// `struct xsk_socket_config` (`<xdp/xsk.h>`).
#[repr(C)]
struct XskSocketConfig {
    rx_size: u32,
    tx_size: u32,
    libxdp_flags: u32,
    xdp_flags: u32,
    bind_flags: u16,
}

type UmemCreate = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_void,
    u64,
    *mut XskRing,
    *mut XskRing,
    *const c_void,
) -> c_int;
type SocketCreate = unsafe extern "C" fn(
    *mut *mut c_void,
    *const c_char,
    u32,
    *mut c_void,
    *mut XskRing,
    *mut XskRing,
    *const XskSocketConfig,
) -> c_int;
type SocketFd = unsafe extern "C" fn(*const c_void) -> c_int;
type SocketDelete = unsafe extern "C" fn(*mut c_void);
type UmemDelete = unsafe extern "C" fn(*mut c_void) -> c_int;
type SetPrint = unsafe extern "C" fn(*const c_void) -> *const c_void;

/// The libxdp functions used, resolved from `libxdp.so.1`.
struct Libxdp {
    umem_create: UmemCreate,
    socket_create: SocketCreate,
    socket_fd: SocketFd,
    socket_delete: SocketDelete,
    umem_delete: UmemDelete,
}

/// The shared object's name (Debian `libxdp1`).
pub const LIBXDP: &str = "libxdp.so.1";

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Libxdp {
    /// Load libxdp once per process (never unloaded: the XDP program it
    /// attached is detached by `xsk_socket__delete`, which must stay callable).
    fn get() -> Result<&'static Libxdp, String> {
        static LIB: std::sync::OnceLock<Result<Libxdp, String>> = std::sync::OnceLock::new();
        LIB.get_or_init(Libxdp::load).as_ref().map_err(Clone::clone)
    }

    fn load() -> Result<Libxdp, String> {
        let name = CString::new(LIBXDP).expect("no NUL");
        // SAFETY: dlopen with a valid C string; the handle is kept for the process's life.
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(format!(
                "{LIBXDP} could not be loaded ({}): install Debian's libxdp1 (`apt-get install libxdp1`), or run via `cargo xtask compare`, which installs it",
                dlerror()
            ));
        }
        let sym = |s: &str| -> Result<*mut c_void, String> {
            let c = CString::new(s).expect("no NUL");
            // SAFETY: `h` is a live handle, `c` a valid C string.
            let p = unsafe { libc::dlsym(h, c.as_ptr()) };
            if p.is_null() {
                Err(format!("{LIBXDP} has no `{s}`: {}", dlerror()))
            } else {
                Ok(p)
            }
        };
        // libbpf (libxdp's dependency) prints warnings about sections of
        // libxdp's own BPF objects it does not know; errors come back as codes.
        if let Ok(p) = sym("libbpf_set_print") {
            // SAFETY: `libbpf_set_print(libbpf_print_fn_t)` from <bpf/libbpf.h>;
            // NULL turns printing off.
            unsafe { std::mem::transmute::<*mut c_void, SetPrint>(p)(std::ptr::null()) };
        }
        // SAFETY: each symbol is the libxdp function of that name, whose C
        // prototype in <xdp/xsk.h> the matching type above mirrors.
        unsafe {
            Ok(Libxdp {
                umem_create: std::mem::transmute::<*mut c_void, UmemCreate>(sym(
                    "xsk_umem__create",
                )?),
                socket_create: std::mem::transmute::<*mut c_void, SocketCreate>(sym(
                    "xsk_socket__create",
                )?),
                socket_fd: std::mem::transmute::<*mut c_void, SocketFd>(sym("xsk_socket__fd")?),
                socket_delete: std::mem::transmute::<*mut c_void, SocketDelete>(sym(
                    "xsk_socket__delete",
                )?),
                umem_delete: std::mem::transmute::<*mut c_void, UmemDelete>(sym(
                    "xsk_umem__delete",
                )?),
            })
        }
    }
}

/// How the XDP program was attached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Attach {
    /// In the driver (XDP_FLAGS_DRV_MODE): igb runs it in its NAPI poll.
    Native,
    /// Generic XDP (XDP_FLAGS_SKB_MODE), after the skb is built.
    Generic,
}

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// UMEM chunk size (libxdp's default frame size), bytes.
const FRAME: usize = 4096;
/// Chunks in the UMEM, all handed to the fill ring at start (its default size).
const FRAMES: usize = 2048;
/// The socket's RX ring, descriptors (libxdp's default).
pub const XSK_RX_RING: u32 = 2048;

/// How the socket is bound.
#[derive(Clone, Copy, Debug)]
pub struct XskOpts {
    /// Preferred busy polling (Linux `Documentation/networking/napi.rst`,
    /// "Preferred busy polling"): `SO_PREFER_BUSY_POLL` 1, `SO_BUSY_POLL`
    /// [`BUSY_POLL_USECS`], `SO_BUSY_POLL_BUDGET` [`BUSY_POLL_BUDGET`] on the
    /// socket, bound with `XDP_USE_NEED_WAKEUP`; the application drives NAPI
    /// with `recvfrom(MSG_DONTWAIT)` when its ring is empty (xdpsock's `-B`).
    /// The device's `napi_defer_hard_irqs` and `gro_flush_timeout` are the
    /// caller's to set.
    pub busy_poll: bool,
}

/// `SO_BUSY_POLL`: µs the socket busy-polls NAPI per call (xdpsock's 20).
pub const BUSY_POLL_USECS: u32 = 20;
/// `SO_BUSY_POLL_BUDGET`: packets per busy-poll NAPI call (pollnic's burst is 32; NAPI's weight 64).
pub const BUSY_POLL_BUDGET: u32 = 64;
/// Linux `include/uapi/asm-generic/socket.h` (libc 0.2 lacks it).
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// An AF_XDP socket receiving from one queue of one interface, with its UMEM.
pub struct XskRx {
    lib: &'static Libxdp,
    umem: *mut c_void,
    xsk: *mut c_void,
    fill: Box<XskRing>,
    // Never used (no TX), but libxdp writes it and keeps a pointer until delete.
    _comp: Box<XskRing>,
    rx: Box<XskRing>,
    area: *mut u8,
    fd: c_int,
    attach: Attach,
    /// Why zero-copy was not had, when the socket runs in copy mode.
    zc_refused: Option<String>,
    busy_poll: bool,
}

// SAFETY: the UMEM, rings and socket belong to this value alone; libxdp keeps
// no thread-bound state for them, so the receiving thread may own it.
unsafe impl Send for XskRx {}

impl XskRx {
    /// Create a UMEM of 2048 × 4 KiB chunks, attach libxdp's XSK program to
    /// `ifname` and bind a socket to `queue`: native XDP with `XDP_ZEROCOPY`
    /// first, then native with `XDP_COPY` (the refusal is kept for
    /// [`XskRx::mode`]), then generic XDP.
    ///
    /// # Errors
    /// libxdp missing, or what libxdp/the kernel refused, as text; a
    /// busy-poll socket option the kernel refuses.
    pub fn open(ifname: &str, queue: u32, opts: XskOpts) -> Result<XskRx, String> {
        let lib = Libxdp::get()?;
        let len = FRAME * FRAMES;
        // SAFETY: a fresh private anonymous mapping, owned by the XskRx below.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(format!("UMEM mmap: {}", io::Error::last_os_error()));
        }
        let mut s = XskRx {
            lib,
            umem: std::ptr::null_mut(),
            xsk: std::ptr::null_mut(),
            fill: XskRing::empty(),
            _comp: XskRing::empty(),
            rx: XskRing::empty(),
            area: area.cast(),
            fd: -1,
            attach: Attach::Native,
            zc_refused: None,
            busy_poll: opts.busy_poll,
        };
        // SAFETY: `area` is `len` bytes we own, page aligned; the ring structs
        // are boxed, so the pointers libxdp keeps stay valid until delete.
        let rc = unsafe {
            (lib.umem_create)(
                &mut s.umem,
                area,
                len as u64,
                &mut *s.fill,
                &mut *s._comp,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "xsk_umem__create: {}",
                io::Error::from_raw_os_error(-rc)
            ));
        }
        // Hand every chunk to the kernel before the bind: a zero-copy igb
        // queue takes its RX buffers from the fill ring when the socket binds
        // (`igb_xsk_pool_setup`), and otherwise waits for a kick
        // (`igb_xsk_wakeup`, a software interrupt through EICS) that in the
        // testbed never started its NAPI: the socket then received nothing.
        let n = s.fill_reserve(FRAMES as u32);
        for i in 0..n {
            s.fill_set(i, (i as usize * FRAME) as u64);
        }
        s.fill_submit(n);
        let name = CString::new(ifname).map_err(|_| "interface name with NUL".to_string())?;
        let mut errors = Vec::new();
        // Busy polling binds with XDP_USE_NEED_WAKEUP (Linux 5.4+,
        // `af_xdp.rst`): the driver then never re-polls by itself, and the
        // application's recvfrom runs NAPI. Without it a zero-copy igb queue
        // short of buffers keeps NAPI polling until the fill ring has some.
        let wakeup = if opts.busy_poll {
            libc::XDP_USE_NEED_WAKEUP
        } else {
            0
        };
        for (attach, flags, bind) in [
            (Attach::Native, XDP_FLAGS_DRV_MODE, libc::XDP_ZEROCOPY),
            (Attach::Native, XDP_FLAGS_DRV_MODE, libc::XDP_COPY),
            (Attach::Generic, XDP_FLAGS_SKB_MODE, libc::XDP_COPY),
        ] {
            let cfg = XskSocketConfig {
                rx_size: XSK_RX_RING,
                tx_size: 0,
                libxdp_flags: 0,
                xdp_flags: flags,
                bind_flags: bind | wakeup,
            };
            // SAFETY: valid C string, our UMEM, a boxed RX ring struct, no TX
            // ring (NULL, tx_size 0), a config of the layout xsk.h declares.
            let rc = unsafe {
                (lib.socket_create)(
                    &mut s.xsk,
                    name.as_ptr(),
                    queue,
                    s.umem,
                    &mut *s.rx,
                    std::ptr::null_mut(),
                    &cfg,
                )
            };
            if rc == 0 {
                s.attach = attach;
                break;
            }
            s.xsk = std::ptr::null_mut();
            let why = io::Error::from_raw_os_error(-rc);
            if bind == libc::XDP_ZEROCOPY {
                s.zc_refused = Some(format!("XDP_ZEROCOPY refused: {why}"));
            }
            errors.push(format!(
                "{attach:?} XDP {}: {why}",
                if bind == libc::XDP_ZEROCOPY {
                    "zero-copy"
                } else {
                    "copy"
                }
            ));
        }
        if s.xsk.is_null() {
            return Err(format!(
                "xsk_socket__create({ifname}, queue {queue}): {}",
                errors.join("; ")
            ));
        }
        // SAFETY: a live socket.
        s.fd = unsafe { (lib.socket_fd)(s.xsk) };
        if opts.busy_poll {
            for (name, opt, val) in [
                ("SO_PREFER_BUSY_POLL", libc::SO_PREFER_BUSY_POLL, 1),
                ("SO_BUSY_POLL", libc::SO_BUSY_POLL, BUSY_POLL_USECS),
                ("SO_BUSY_POLL_BUDGET", SO_BUSY_POLL_BUDGET, BUSY_POLL_BUDGET),
            ] {
                let v = val as c_int;
                // SAFETY: an int option of the size passed, read by the kernel only.
                let rc = unsafe {
                    libc::setsockopt(
                        s.fd,
                        libc::SOL_SOCKET,
                        opt,
                        (&v as *const c_int).cast(),
                        std::mem::size_of::<c_int>() as u32,
                    )
                };
                if rc != 0 {
                    return Err(format!(
                        "setsockopt({name}, {val}): {} (busy polling needs Linux >= 5.11 and CAP_NET_ADMIN)",
                        io::Error::last_os_error()
                    ));
                }
            }
        }
        Ok(s)
    }

    /// The mode column: `xdp-drv zc`, `xdp-drv copy`, `xdp-skb copy`, with
    /// ` busy-poll` when bound so, and why zero-copy was refused, if it was.
    pub fn mode(&self) -> String {
        let attach = match self.attach {
            Attach::Native => "drv",
            Attach::Generic => "skb",
        };
        let zc = if self.zero_copy() { "zc" } else { "copy" };
        let bp = if self.busy_poll { " busy-poll" } else { "" };
        match &self.zc_refused {
            Some(why) => format!("xdp-{attach} {zc}{bp} ({why})"),
            None => format!("xdp-{attach} {zc}{bp}"),
        }
    }

    /// True when the kernel bound the socket in zero-copy mode (XDP_OPTIONS).
    pub fn zero_copy(&self) -> bool {
        let mut o = libc::xdp_options { flags: 0 };
        let mut l = std::mem::size_of::<libc::xdp_options>() as u32;
        // SAFETY: `o`/`l` valid for writing; the kernel writes at most `l` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                (&mut o as *mut libc::xdp_options).cast(),
                &mut l,
            )
        };
        rc == 0 && o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
    }

    /// The socket's drop counters (XDP_STATISTICS).
    pub fn stats(&self) -> libc::xdp_statistics {
        // SAFETY: plain data; zero is valid.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut l = std::mem::size_of::<libc::xdp_statistics>() as u32;
        // SAFETY: as in `zero_copy`.
        unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut st as *mut libc::xdp_statistics).cast(),
                &mut l,
            )
        };
        st
    }

    /// Hand up to 64 received frames to `f`, waiting up to `timeout_ms` in
    /// poll(2) when none is ready; their chunks go straight back to the fill
    /// ring. Returns the frames handed over.
    ///
    /// A busy-polling socket never sleeps in poll(2): it calls
    /// `recvfrom(MSG_DONTWAIT)`, which runs the queue's NAPI poll on this
    /// thread, and looks again (`timeout_ms` is then ignored).
    pub fn recv(&mut self, timeout_ms: i32, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = self.rx_peek(64);
        if n == 0 && self.busy_poll {
            // SAFETY: a zero-length recvfrom on our socket; no buffer is written.
            unsafe {
                libc::recvfrom(
                    self.fd,
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            n = self.rx_peek(64);
            if n == 0 {
                return 0;
            }
        }
        if n == 0 {
            let mut p = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, timeout_ms) };
            n = self.rx_peek(64);
            if n == 0 {
                return 0;
            }
        }
        let first = self.rx.cached_cons.wrapping_sub(n);
        let got = self.fill_reserve(n);
        for i in 0..n {
            // SAFETY: entry `first + i` was published by the kernel (peeked
            // under acquire) and is ours until the consumer index moves.
            let d = unsafe {
                self.rx
                    .ring
                    .cast::<libc::xdp_desc>()
                    .add((first.wrapping_add(i) & self.rx.mask) as usize)
                    .read()
            };
            let (addr, len) = (d.addr as usize, d.len as usize);
            // The kernel's offsets are checked anyway: a frame must lie in the UMEM.
            if addr.checked_add(len).is_some_and(|e| e <= FRAME * FRAMES) {
                // SAFETY: inside our UMEM (checked), written by the kernel
                // before it published the descriptor.
                f(unsafe { std::slice::from_raw_parts(self.area.add(addr), len) });
            }
            if i < got {
                self.fill_set(i, (addr & !(FRAME - 1)) as u64);
            }
        }
        self.fill_submit(got);
        self.rx_release();
        n as usize
    }

    fn rx_peek(&mut self, max: u32) -> u32 {
        let r = &mut *self.rx;
        let mut avail = r.cached_prod.wrapping_sub(r.cached_cons);
        if avail == 0 {
            // SAFETY: `producer` points into the kernel-mapped ring, u32-aligned.
            r.cached_prod = unsafe { AtomicU32::from_ptr(r.producer) }.load(Ordering::Acquire);
            avail = r.cached_prod.wrapping_sub(r.cached_cons);
        }
        let n = avail.min(max);
        r.cached_cons = r.cached_cons.wrapping_add(n);
        n
    }

    fn rx_release(&mut self) {
        let r = &*self.rx;
        // SAFETY: as in `rx_peek`; release orders our reads of the entries before.
        unsafe { AtomicU32::from_ptr(r.consumer) }.store(r.cached_cons, Ordering::Release);
    }

    /// Reserve up to `n` fill slots (starting at `cached_prod`); returns how many.
    fn fill_reserve(&mut self, n: u32) -> u32 {
        let r = &mut *self.fill;
        let mut free = r.cached_cons.wrapping_sub(r.cached_prod);
        if free < n {
            // SAFETY: `consumer` points into the kernel-mapped fill ring.
            let c = unsafe { AtomicU32::from_ptr(r.consumer) }.load(Ordering::Acquire);
            r.cached_cons = c.wrapping_add(r.size);
            free = r.cached_cons.wrapping_sub(r.cached_prod);
        }
        free.min(n)
    }

    fn fill_set(&mut self, i: u32, addr: u64) {
        let r = &*self.fill;
        // SAFETY: slot `cached_prod + i` was reserved (free per the kernel's
        // consumer index), masked into the ring of `size` u64 entries.
        unsafe {
            r.ring
                .cast::<u64>()
                .add((r.cached_prod.wrapping_add(i) & r.mask) as usize)
                .write(addr)
        };
    }

    fn fill_submit(&mut self, n: u32) {
        let r = &mut *self.fill;
        r.cached_prod = r.cached_prod.wrapping_add(n);
        // SAFETY: as in `fill_reserve`; release publishes the entries written.
        unsafe { AtomicU32::from_ptr(r.producer) }.store(r.cached_prod, Ordering::Release);
    }
}

impl Drop for XskRx {
    fn drop(&mut self) {
        // SAFETY: socket then UMEM, each created by this value and deleted
        // once (libxdp detaches its XDP program with the last socket); the
        // UMEM area is unmapped only after the kernel let go of it.
        unsafe {
            if !self.xsk.is_null() {
                (self.lib.socket_delete)(self.xsk);
            }
            if !self.umem.is_null() {
                (self.lib.umem_delete)(self.umem);
            }
            libc::munmap(self.area.cast(), FRAME * FRAMES);
        }
    }
}

/// Mount bpffs on /sys/fs/bpf unless one is there (libxdp pins its XDP
/// dispatcher there; the testbed's guest does not mount it). Returns whether
/// it mounted one.
///
/// # Errors
/// The mount(2) error, as text.
pub fn ensure_bpffs() -> Result<bool, String> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if mounts
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf") && l.contains(" bpf "))
    {
        return Ok(false);
    }
    let c = |s: &str| CString::new(s).expect("no NUL");
    let (src, dir, fs) = (c("bpf"), c("/sys/fs/bpf"), c("bpf"));
    // SAFETY: valid C strings; no data argument.
    let rc = unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(format!(
            "mount -t bpf bpf /sys/fs/bpf: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(true)
}

/// The socket's TX ring, descriptors (libxdp's default).
pub const XSK_TX_RING: u32 = 2048;
/// Chunks of the UMEM that the TX socket sends from (the rest go to the
/// fill ring, so a zero-copy RX queue is never short of buffers).
const TX_CHUNKS: usize = FRAMES / 2;

/// An AF_XDP socket that transmits on one queue of one interface (the
/// `tx-kernel-afxdp` row): a UMEM of 2048 × 4 KiB chunks, half of them
/// handed to the fill ring before the bind (the socket has an RX ring too:
/// libxdp's XSK program is attached as for [`XskRx`], and igb runs a
/// zero-copy queue only with an XDP program), the other half the frames it
/// sends. Each send reclaims completed chunks from the completion ring,
/// writes frames into free chunks, publishes their descriptors on the TX
/// ring and kicks the kernel with `sendto(MSG_DONTWAIT)`: in copy mode that
/// call transmits (`xsk_generic_xmit`), in zero-copy mode it wakes the
/// queue's NAPI (`igb_xsk_wakeup`), which puts the chunks on the NIC's ring.
pub struct XskTx {
    lib: &'static Libxdp,
    umem: *mut c_void,
    xsk: *mut c_void,
    fill: Box<XskRing>,
    comp: Box<XskRing>,
    rx: Box<XskRing>,
    tx: Box<XskRing>,
    area: *mut u8,
    fd: c_int,
    zero_copy: bool,
    free: Vec<u64>,
    /// Descriptors published on the TX ring.
    pub submitted: u64,
    /// Chunks the kernel returned on the completion ring.
    pub completed: u64,
    /// Kicks (`sendto`) made, and of them refused (EAGAIN, EBUSY, ENOBUFS).
    pub kicks: (u64, u64),
}

// SAFETY: as for XskRx: everything belongs to this value alone.
unsafe impl Send for XskTx {}

impl XskTx {
    /// Attach libxdp's XSK program to `ifname` in native (driver) mode and
    /// bind a socket to `queue` with `XDP_ZEROCOPY` (`zero_copy`) or
    /// `XDP_COPY`.
    ///
    /// # Errors
    /// libxdp missing, or what libxdp/the kernel refused, as text.
    pub fn open(ifname: &str, queue: u32, zero_copy: bool) -> Result<XskTx, String> {
        let lib = Libxdp::get()?;
        let len = FRAME * FRAMES;
        // SAFETY: a fresh private anonymous mapping, owned by the XskTx below.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(format!("UMEM mmap: {}", io::Error::last_os_error()));
        }
        let mut s = XskTx {
            lib,
            umem: std::ptr::null_mut(),
            xsk: std::ptr::null_mut(),
            fill: XskRing::empty(),
            comp: XskRing::empty(),
            rx: XskRing::empty(),
            tx: XskRing::empty(),
            area: area.cast(),
            fd: -1,
            zero_copy,
            free: (FRAMES - TX_CHUNKS..FRAMES)
                .map(|i| (i * FRAME) as u64)
                .collect(),
            submitted: 0,
            completed: 0,
            kicks: (0, 0),
        };
        // SAFETY: as in XskRx::open: our area, boxed ring structs.
        let rc = unsafe {
            (lib.umem_create)(
                &mut s.umem,
                area,
                len as u64,
                &mut *s.fill,
                &mut *s.comp,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "xsk_umem__create: {}",
                io::Error::from_raw_os_error(-rc)
            ));
        }
        let n = prod_reserve(&mut s.fill, (FRAMES - TX_CHUNKS) as u32);
        for i in 0..n {
            prod_set(&s.fill, i, (i as usize * FRAME) as u64);
        }
        prod_submit(&mut s.fill, n);
        let name = CString::new(ifname).map_err(|_| "interface name with NUL".to_string())?;
        let cfg = XskSocketConfig {
            rx_size: XSK_RX_RING,
            tx_size: XSK_TX_RING,
            libxdp_flags: 0,
            xdp_flags: XDP_FLAGS_DRV_MODE,
            bind_flags: if zero_copy {
                libc::XDP_ZEROCOPY
            } else {
                libc::XDP_COPY
            },
        };
        // SAFETY: valid C string, our UMEM, boxed RX and TX ring structs, a
        // config of the layout xsk.h declares.
        let rc = unsafe {
            (lib.socket_create)(
                &mut s.xsk,
                name.as_ptr(),
                queue,
                s.umem,
                &mut *s.rx,
                &mut *s.tx,
                &cfg,
            )
        };
        if rc != 0 {
            s.xsk = std::ptr::null_mut();
            return Err(format!(
                "xsk_socket__create({ifname}, queue {queue}, native XDP, {}): {}",
                if zero_copy { "zero-copy" } else { "copy" },
                io::Error::from_raw_os_error(-rc)
            ));
        }
        // SAFETY: a live socket.
        s.fd = unsafe { (lib.socket_fd)(s.xsk) };
        Ok(s)
    }

    /// `xdp-drv zc` or `xdp-drv copy`, as the kernel reports it (XDP_OPTIONS).
    pub fn mode(&self) -> String {
        let mut o = libc::xdp_options { flags: 0 };
        let mut l = std::mem::size_of::<libc::xdp_options>() as u32;
        // SAFETY: `o`/`l` valid for writing; the kernel writes at most `l` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                (&mut o as *mut libc::xdp_options).cast(),
                &mut l,
            )
        };
        let zc = rc == 0 && o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0;
        debug_assert!(zc == self.zero_copy || rc != 0);
        format!("xdp-drv {} TX", if zc { "zc" } else { "copy" })
    }

    /// Take back the chunks the kernel has completed.
    pub fn reclaim(&mut self) -> u32 {
        let n = cons_peek(&mut self.comp, XSK_TX_RING);
        let first = self.comp.cached_cons.wrapping_sub(n);
        for i in 0..n {
            // SAFETY: entry `first + i` was published by the kernel (peeked
            // under acquire), in the ring of `size` u64 entries.
            let addr = unsafe {
                self.comp
                    .ring
                    .cast::<u64>()
                    .add((first.wrapping_add(i) & self.comp.mask) as usize)
                    .read()
            };
            self.free.push(addr & !(FRAME as u64 - 1));
        }
        cons_release(&self.comp);
        self.completed += n as u64;
        n
    }

    /// Write up to `n` frames of `len` bytes with `write(frame, k)` (k = 0..)
    /// into free chunks, publish them on the TX ring and kick the kernel.
    /// Returns how many were published.
    pub fn send(&mut self, n: usize, len: usize, mut write: impl FnMut(&mut [u8], usize)) -> usize {
        self.reclaim();
        let want = (n.min(self.free.len()) as u32).min(XSK_TX_RING);
        let got = prod_reserve(&mut self.tx, want);
        for i in 0..got {
            let addr = self.free.pop().expect("reserved no more than free");
            // SAFETY: chunk `addr` is ours (not on any ring) and `len` fits a chunk.
            let frame = unsafe {
                std::slice::from_raw_parts_mut(self.area.add(addr as usize), len.min(FRAME))
            };
            write(frame, i as usize);
            let d = libc::xdp_desc {
                addr,
                len: len as u32,
                options: 0,
            };
            // SAFETY: slot `cached_prod + i` was reserved, in the ring of `size` descriptors.
            unsafe {
                self.tx
                    .ring
                    .cast::<libc::xdp_desc>()
                    .add((self.tx.cached_prod.wrapping_add(i) & self.tx.mask) as usize)
                    .write(d)
            };
        }
        prod_submit(&mut self.tx, got);
        self.submitted += got as u64;
        if got > 0 || self.submitted > self.completed {
            self.kick();
        }
        got as usize
    }

    fn kick(&mut self) {
        // SAFETY: a zero-length sendto on our socket; nothing is read or written.
        let rc = unsafe {
            libc::sendto(
                self.fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        self.kicks.0 += 1;
        if rc < 0 {
            self.kicks.1 += 1;
        }
    }

    /// Kick and reclaim until every published frame has completed or
    /// `timeout` passed; returns the frames still outstanding.
    pub fn flush(&mut self, timeout: std::time::Duration) -> u64 {
        let t0 = std::time::Instant::now();
        while self.submitted > self.completed && t0.elapsed() < timeout {
            self.kick();
            self.reclaim();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.submitted - self.completed
    }
}

impl Drop for XskTx {
    fn drop(&mut self) {
        // SAFETY: as for XskRx.
        unsafe {
            if !self.xsk.is_null() {
                (self.lib.socket_delete)(self.xsk);
            }
            if !self.umem.is_null() {
                (self.lib.umem_delete)(self.umem);
            }
            libc::munmap(self.area.cast(), FRAME * FRAMES);
        }
    }
}

/// Reserve up to `n` slots of a producer ring; returns how many.
fn prod_reserve(r: &mut XskRing, n: u32) -> u32 {
    let mut free = r.cached_cons.wrapping_sub(r.cached_prod);
    if free < n {
        // SAFETY: `consumer` points into the kernel-mapped ring, u32-aligned.
        let c = unsafe { AtomicU32::from_ptr(r.consumer) }.load(Ordering::Acquire);
        r.cached_cons = c.wrapping_add(r.size);
        free = r.cached_cons.wrapping_sub(r.cached_prod);
    }
    free.min(n)
}

/// Write a fill-ring entry (an address) in reserved slot `cached_prod + i`.
fn prod_set(r: &XskRing, i: u32, addr: u64) {
    // SAFETY: the slot was reserved, masked into the ring of `size` u64 entries.
    unsafe {
        r.ring
            .cast::<u64>()
            .add((r.cached_prod.wrapping_add(i) & r.mask) as usize)
            .write(addr)
    };
}

/// Publish `n` reserved entries.
fn prod_submit(r: &mut XskRing, n: u32) {
    r.cached_prod = r.cached_prod.wrapping_add(n);
    // SAFETY: as in `prod_reserve`; release publishes the entries written.
    unsafe { AtomicU32::from_ptr(r.producer) }.store(r.cached_prod, Ordering::Release);
}

/// Entries the kernel published on a consumer ring, at most `max` (advances `cached_cons`).
fn cons_peek(r: &mut XskRing, max: u32) -> u32 {
    let mut avail = r.cached_prod.wrapping_sub(r.cached_cons);
    if avail == 0 {
        // SAFETY: `producer` points into the kernel-mapped ring, u32-aligned.
        r.cached_prod = unsafe { AtomicU32::from_ptr(r.producer) }.load(Ordering::Acquire);
        avail = r.cached_prod.wrapping_sub(r.cached_cons);
    }
    let n = avail.min(max);
    r.cached_cons = r.cached_cons.wrapping_add(n);
    n
}

/// Hand the peeked entries back.
fn cons_release(r: &XskRing) {
    // SAFETY: as in `cons_peek`; release orders our reads of the entries before.
    unsafe { AtomicU32::from_ptr(r.consumer) }.store(r.cached_cons, Ordering::Release);
}
