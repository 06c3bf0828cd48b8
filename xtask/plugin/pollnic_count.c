/*
 * pollnic-count: a QEMU TCG plugin that counts guest work per vCPU, for the
 * testbed's cost-per-packet figures (docs/design/counting.md).
 *
 * Per vCPU it counts executed instructions, split by the translated block's
 * address into user (below the canonical hole), kernel (above it) and the
 * kernel's idle loop (the range [idle_start, idle_end) given as arguments:
 * `.cpuidle.text` from /proc/kallsyms of a `nokaslr` boot), and the bytes the
 * user and kernel instructions load and store (one memory callback per access,
 * with its size). Idle instructions are kept apart so that a polling idle loop
 * (`idle=poll`) costs nothing in the figures; their memory accesses are not
 * instrumented at all.
 *
 * MMIO (mmio=on, the default; needs mem=on): an access whose page QEMU's
 * softmmu TLB marks as I/O (qemu_plugin_hwaddr_is_io: a device's register
 * region, not RAM) is also counted as an MMIO read or write with its bytes,
 * per vCPU, user and kernel, and inside marked regions. The platform's fixed
 * range 0xfec00000-0xffffffff (IOAPIC, HPET, local APIC, firmware) is left
 * out: on silicon those are not PCIe round trips. Each distinct (guest
 * physical address, read or write, instruction address) is an MMIO site,
 * counted per vCPU and written to the profile file (its `mmio` lines).
 *
 * Every `period_us` microseconds (default 1000) a thread rewrites `out` with
 * one fixed-width line per vCPU, framed by a sequence number at both ends so a
 * reader can tell a torn read (docs/design/counting.md gives the format).
 *
 * Per translated block it also keeps a profile (profile=SLOTS, default 1048576;
 * 0 turns it off): per vCPU, the instructions executed from each block's start
 * address ("all", an inline add), and those executed inside committed marked
 * regions ("marked": a conditional callback while a region is open logs the
 * block, COMMIT adds the log, DISCARD drops it). The PROFILE marker writes to
 * `out.prof`, before it returns, what each block ran since the previous
 * PROFILE marker; the guest resolves the addresses to functions
 * (examples/support/profile.rs).
 *
 * A marked region belongs to the process that opened it: with switch=ADDR
 * (the kernel's finish_task_switch), each task switch reads CR3, and while
 * another process runs on the region's vCPU the region is paused.
 *
 * The cache model (cache=on|marker, default off; needs mem=on): per vCPU an
 * L1D and an L2, a shared LLC, with device writes found by a byte shadow (see
 * its section below); `marker` runs the model only between the guest's
 * CACHE_ARM and CACHE_DISARM markers (so the rest of a counting guest runs
 * at the counter's own speed), and then its levels only while a marked
 * region is open on the vCPU (its byte shadow sees every store while armed). Its counts are extra `cache` lines of the file, written only when
 * it is on: with cache=off the output and the cost are what they were.
 *
 * Arguments: out=PATH (required), idle_start=0xADDR, idle_end=0xADDR,
 * mem=on|off (default on), mmio=on|off (default on), cache=on|marker|off
 * (default off), period_us=N,
 * profile=SLOTS (a power of two or 0), switch=0xADDR.
 *
 * Only the dozen functions of QEMU's plugin API (version 4, QEMU 9.0 and
 * later) that this file uses are declared below, from their documented
 * signatures: Debian ships no plugin headers. The plugin is a separate program
 * loaded by QEMU; nothing of it is linked into pollnic.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the plugin API, as documented for API version 4 ---- */
typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_scoreboard;
typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;
enum qemu_plugin_cb_flags { CB_NO_REGS = 0, CB_R_REGS = 1 };
enum qemu_plugin_mem_rw { MEM_R = 1, MEM_W = 2 };
enum qemu_plugin_op { INLINE_ADD_U64 = 0 };
enum qemu_plugin_cond { COND_NEVER = 0, COND_ALWAYS, COND_EQ, COND_NE };
typedef uint32_t qemu_plugin_meminfo_t;
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*mem_cb_t)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void *);
typedef void (*udata_cb_t)(qemu_plugin_id_t, void *);
typedef void (*vcpu_cb_t)(qemu_plugin_id_t, unsigned int);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb_t);
void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb *, enum qemu_plugin_op,
                                                       qemu_plugin_u64, uint64_t);
typedef void (*vcpu_udata_cb_t)(unsigned int, void *);
void qemu_plugin_register_vcpu_tb_exec_cond_cb(struct qemu_plugin_tb *, vcpu_udata_cb_t, enum qemu_plugin_cb_flags,
                                               enum qemu_plugin_cond, qemu_plugin_u64, uint64_t, void *);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *, mem_cb_t, enum qemu_plugin_cb_flags,
                                      enum qemu_plugin_mem_rw, void *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb_t, void *);
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t, vcpu_cb_t);
typedef void (*insn_cb_t)(unsigned int, void *);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *, insn_cb_t, enum qemu_plugin_cb_flags,
                                            void *);
/* Registers (API version 3 and later), with the two glib types they use. */
typedef struct {
    char *data;
    unsigned int len;
} GArray;
typedef struct {
    uint8_t *data;
    unsigned int len;
} GByteArray;
struct qemu_plugin_register;
typedef struct {
    struct qemu_plugin_register *handle;
    const char *name;
    const char *feature;
} qemu_plugin_reg_descriptor;
GArray *qemu_plugin_get_registers(void);
int qemu_plugin_read_register(struct qemu_plugin_register *, GByteArray *);
GByteArray *g_byte_array_new(void);
GByteArray *g_byte_array_set_size(GByteArray *, unsigned int);
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *, void *, size_t);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t);
struct qemu_plugin_hwaddr;
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t, uint64_t);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *);
const char *qemu_plugin_hwaddr_device_name(const struct qemu_plugin_hwaddr *);
/* The value an access loaded or stored (API version 3 and later, QEMU 9.1). */
enum qemu_plugin_mem_value_type {
    MEM_VALUE_U8 = 0,
    MEM_VALUE_U16,
    MEM_VALUE_U32,
    MEM_VALUE_U64,
    MEM_VALUE_U128,
};
typedef struct {
    enum qemu_plugin_mem_value_type type;
    union {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        struct {
            uint64_t low;
            uint64_t high;
        } u128;
    } data;
} qemu_plugin_mem_value;
qemu_plugin_mem_value qemu_plugin_mem_get_value(qemu_plugin_meminfo_t);
struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t);
void *qemu_plugin_scoreboard_find(struct qemu_plugin_scoreboard *, unsigned int);
void qemu_plugin_outs(const char *);

EXPORT int qemu_plugin_version = 4;

/* ---- the counters ---- */
enum { USER = 0, KERNEL = 1, IDLE = 2 };

/* One vCPU's counters: a scoreboard entry (QEMU keeps one per vCPU). */
struct counts {
    uint64_t insns[3];  /* USER, KERNEL, IDLE */
    uint64_t loaded[2]; /* bytes, USER and KERNEL */
    uint64_t stored[2];
    /* Marked regions: what ran between a BEGIN and a COMMIT marker. */
    uint64_t marked_insns, marked_loaded, marked_stored, marks, marked_user;
    /* The same, of the regions committed by COMMIT_ONE (a burst of one packet). */
    uint64_t one_insns, one_loaded, one_stored, ones, one_user;
    uint64_t start_insns, start_loaded, start_stored, start_user, open;
    /* The address space (CR3) of the process that opened the region; while
     * another process runs on the vCPU the region is paused (open = 0,
     * paused = 1) and what it ran is left out (see on_switch). */
    uint64_t region_cr3, paused, pause_insns, pause_loaded, pause_stored, pause_user, pauses;
    /* MMIO: accesses whose page QEMU's TLB marks as I/O (a device's
     * MemoryRegion, not RAM), outside the platform's fixed range (see
     * is_platform): reads and writes, and their bytes, USER and KERNEL. */
    uint64_t mmio_r[2], mmio_w[2], mmio_rb[2], mmio_wb[2];
    /* The same inside marked regions (all of them, and those of one packet). */
    uint64_t marked_mmio_r, marked_mmio_w, one_mmio_r, one_mmio_w;
    uint64_t start_mmio_r, start_mmio_w, pause_mmio_r, pause_mmio_w;
    /* The cache model (cache=on|marker), USER and KERNEL: line accesses that
     * missed L1D, that missed L2, that missed the LLC and every other core's
     * caches (with DDIO, and in the variant without it), and lines found
     * written by a device since this CPU last saw them (see cache_access). */
    uint64_t l1d_miss[2], l2_miss[2], llc_miss[2], llc_miss_no_ddio[2], ext_lines[2];
};

/*
 * Markers: the 8-byte no-op `nopl 0xNN434e50(%rax,%rax,1)` (0f 1f 84 00 and the
 * displacement), emitted by the guest program (examples/support/marker.rs).
 * BEGIN opens a region on its vCPU, COMMIT adds what ran since to the marked
 * counts, DISCARD drops it (an empty poll), COMMIT_ONE commits a region that
 * handled exactly one packet (kept apart as well), PROFILE writes the profile
 * file. Each costs one callback.
 */
enum {
    MARK_BEGIN = 1,
    MARK_COMMIT = 2,
    MARK_DISCARD = 3,
    MARK_COMMIT_ONE = 4,
    MARK_PROFILE = 5,
    MARK_CACHE_ARM = 6,
    MARK_CACHE_DISARM = 7,
};
static int marker_of(const struct qemu_plugin_insn *insn)
{
    uint8_t b[8];
    if (qemu_plugin_insn_size(insn) != 8 || qemu_plugin_insn_data(insn, b, 8) != 8) {
        return 0;
    }
    if (b[0] != 0x0f || b[1] != 0x1f || b[2] != 0x84 || b[3] != 0x00 || b[5] != 0x43 || b[6] != 0x4e ||
        b[7] != 0x50) {
        return 0;
    }
    return b[4] >= MARK_BEGIN && b[4] <= MARK_CACHE_DISARM ? b[4] : 0;
}

static struct qemu_plugin_scoreboard *board;
static uint64_t idle_start, idle_end;
static bool count_mem = true;
static bool count_mmio = true;
static int vcpus;       /* vCPUs of the machine */
static int vcpus_ready; /* vCPUs initialised so far (their scoreboard entries exist) */

/* Whether `vcpu`'s scoreboard entries exist. Under round-robin TCG
 * (`-accel tcg,thread=single`) QEMU 10.0 initialises a vCPU for plugins by
 * work queued on it, and the vCPU can run translated code before that work
 * runs; looking its entry up then fails QEMU's assertion
 * (qemu_plugin_scoreboard_find: vcpu_index < qemu_plugin_num_vcpus()).
 * Such a vCPU's first instructions go uncounted (boot firmware). */
static inline bool vcpu_known(unsigned int vcpu)
{
    return vcpu < (unsigned int)__atomic_load_n(&vcpus_ready, __ATOMIC_ACQUIRE);
}
static int out_fd = -1;
static unsigned period_us = 1000;
static volatile bool stopping;
static pthread_t writer;
static uint64_t seq;

/* ---- MMIO sites: (guest physical address, read or write, instruction) ---- */
#define SITES 65536 /* a power of two, filled to 3/4 at most: the boot alone
                     * reads a few thousand PCI config (ECAM) addresses */
struct site {
    uint64_t phys, pc, store; /* store: 1 write, 2 read (0: free) */
    const char *device;       /* QEMU's MemoryRegion name (interned by QEMU) */
};
static struct site sites[SITES];
static uint64_t sites_used, sites_unplaced;
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
/* Per vCPU, SITES counters (slot 0: accesses that found no slot). */
static struct qemu_plugin_scoreboard *site_counts;
static uint64_t *prev_sites; /* at the previous PROFILE marker (vCPU * SITES + slot) */

static uint64_t site_slot(uint64_t phys, uint64_t pc, bool store, const char *device)
{
    uint64_t rw = store ? 1 : 2;
    uint64_t h = ((phys * 0x9E3779B97F4A7C15ULL) ^ (pc * 0xC2B2AE3D27D4EB4FULL) ^ rw) >> 20;
    uint64_t found = 0;
    pthread_mutex_lock(&sites_lock);
    for (uint64_t i = 0; i < 64; i++) {
        uint64_t s = (h + i) & (SITES - 1);
        if (s == 0) {
            continue;
        }
        struct site *e = &sites[s];
        if (e->store == rw && e->phys == phys && e->pc == pc) {
            found = s;
            break;
        }
        if (e->store == 0) {
            if (sites_used < SITES / 4 * 3) {
                e->phys = phys;
                e->pc = pc;
                e->device = device;
                __atomic_store_n(&e->store, rw, __ATOMIC_RELEASE);
                sites_used++;
                found = s;
            }
            break;
        }
    }
    if (!found) {
        sites_unplaced++;
    }
    pthread_mutex_unlock(&sites_lock);
    return found;
}

/* ---- the profile: instructions per translated block's start address ---- */
#define LOG_LEN 65536
static uint64_t prof_slots = 1048576; /* a power of two; 0: no profile */
/* The block start address + 1 that owns each slot (0: free). Slot 0 is kept
 * for blocks that found no free slot (the table is filled to 3/4 at most). */
static uint64_t *prof_keys;
static uint64_t prof_used, prof_unplaced;
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static char prof_path[4096];
static uint64_t prof_seq;
/* Per vCPU, prof_slots counters each: every execution ("all"), and
 * executions inside committed marked regions ("marked"). */
static struct qemu_plugin_scoreboard *prof_all, *prof_marked;
/* The counts at the previous PROFILE marker (index: vCPU * prof_slots + slot),
 * and each vCPU's `lost` then. */
static uint64_t *prev_all, *prev_marked, prev_lost[64];
/* Per vCPU: the blocks run since the open region began, (slot << 16 | insns)
 * each; what did not fit is counted in `pending_lost`, and what was committed
 * without a slot in `lost` (written to the profile file). */
struct region_log {
    uint64_t len, pending_lost, lost;
    uint64_t e[LOG_LEN];
};
static struct qemu_plugin_scoreboard *logs;

static uint64_t prof_slot(uint64_t vaddr)
{
    uint64_t mask = prof_slots - 1, key = vaddr + 1;
    uint64_t h = (vaddr * 0x9E3779B97F4A7C15ULL) >> 17;
    uint64_t found = 0;
    pthread_mutex_lock(&prof_lock);
    for (uint64_t i = 0; i < 256; i++) {
        uint64_t s = (h + i) & mask;
        if (s == 0) {
            continue;
        }
        if (prof_keys[s] == key) {
            found = s;
            break;
        }
        if (prof_keys[s] == 0) {
            if (prof_used < prof_slots / 4 * 3) {
                __atomic_store_n(&prof_keys[s], key, __ATOMIC_RELEASE);
                prof_used++;
                found = s;
            }
            break;
        }
    }
    if (!found) {
        prof_unplaced++;
    }
    pthread_mutex_unlock(&prof_lock);
    return found;
}

static void on_region_tb(unsigned int vcpu, void *udata)
{
    if (!vcpu_known(vcpu)) {
        return;
    }
    struct region_log *l = qemu_plugin_scoreboard_find(logs, vcpu);
    if (l->len < LOG_LEN) {
        l->e[l->len++] = (uintptr_t)udata;
    } else {
        l->pending_lost += (uintptr_t)udata & 0xffff;
    }
}

static void region_begin(unsigned int vcpu)
{
    if (!vcpu_known(vcpu)) {
        return;
    }
    if (prof_slots) {
        struct region_log *l = qemu_plugin_scoreboard_find(logs, vcpu);
        l->len = 0;
        l->pending_lost = 0;
    }
}

static void region_commit(unsigned int vcpu)
{
    if (!vcpu_known(vcpu)) {
        return;
    }
    if (!prof_slots) {
        return;
    }
    struct region_log *l = qemu_plugin_scoreboard_find(logs, vcpu);
    uint64_t *marked = qemu_plugin_scoreboard_find(prof_marked, vcpu);
    for (uint64_t i = 0; i < l->len; i++) {
        marked[l->e[i] >> 16] += l->e[i] & 0xffff;
    }
    l->lost += l->pending_lost;
    l->len = 0;
    l->pending_lost = 0;
}

/* The profile file: what ran since the previous PROFILE marker. A header, a
 * `lost` line per vCPU, then one line per block start address that ran: the
 * address, "all" per vCPU, "marked" per vCPU (slot 0's line is `unplaced`),
 * and an end line with the header's seq. Written by the vCPU that ran the
 * PROFILE marker, before the marker returns (the others go on running: what
 * they add meanwhile is in this file or the next). */
static void dump_profile(void)
{
    if (!prof_slots) {
        return;
    }
    static pthread_mutex_t dumping = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&dumping);
    FILE *f = fopen(prof_path, "w");
    if (!f) {
        pthread_mutex_unlock(&dumping);
        return;
    }
    int ready = __atomic_load_n(&vcpus_ready, __ATOMIC_ACQUIRE);
    uint64_t seq_now = ++prof_seq;
    fprintf(f, "pollnic-prof 1 seq %" PRIu64 " vcpus %d slots %" PRIu64 " used %" PRIu64 " unplaced %" PRIu64 "\n",
            seq_now, ready, prof_slots, __atomic_load_n(&prof_used, __ATOMIC_RELAXED),
            __atomic_load_n(&prof_unplaced, __ATOMIC_RELAXED));
    if (ready > vcpus) {
        ready = vcpus;
    }
    if (ready > 64) {
        ready = 64;
    }
    for (int v = 0; v < ready; v++) {
        struct region_log *l = qemu_plugin_scoreboard_find(logs, v);
        uint64_t lost = l->lost;
        fprintf(f, "lost %d %" PRIu64 "\n", v, lost - prev_lost[v]);
        prev_lost[v] = lost;
    }
    uint64_t all[64], marked[64];
    for (uint64_t s = 0; s < prof_slots; s++) {
        uint64_t key = __atomic_load_n(&prof_keys[s], __ATOMIC_ACQUIRE);
        if (s != 0 && key == 0) {
            continue;
        }
        bool any = false;
        for (int v = 0; v < ready; v++) {
            uint64_t *pa = &prev_all[(uint64_t)v * prof_slots + s], *pm = &prev_marked[(uint64_t)v * prof_slots + s];
            uint64_t a = ((uint64_t *)qemu_plugin_scoreboard_find(prof_all, v))[s];
            uint64_t m = ((uint64_t *)qemu_plugin_scoreboard_find(prof_marked, v))[s];
            all[v] = a - *pa;
            marked[v] = m - *pm;
            *pa = a;
            *pm = m;
            any = any || all[v] != 0 || marked[v] != 0;
        }
        if (!any) {
            continue;
        }
        if (s == 0) {
            fputs("unplaced", f);
        } else {
            fprintf(f, "%" PRIx64, key - 1);
        }
        for (int v = 0; v < ready; v++) {
            fprintf(f, " %" PRIu64, all[v]);
        }
        for (int v = 0; v < ready; v++) {
            fprintf(f, " %" PRIu64, marked[v]);
        }
        fputc('\n', f);
    }
    /* MMIO sites: `mmio PHYS r|w PC DEVICE` and what each vCPU did there
     * since the previous PROFILE marker (slot 0: `mmio-unplaced`). */
    for (uint64_t s = 0; site_counts && s < SITES; s++) {
        uint64_t rw = __atomic_load_n(&sites[s].store, __ATOMIC_ACQUIRE);
        if (s != 0 && rw == 0) {
            continue;
        }
        bool any = false;
        for (int v = 0; v < ready; v++) {
            uint64_t *p = &prev_sites[(uint64_t)v * SITES + s];
            uint64_t now = ((uint64_t *)qemu_plugin_scoreboard_find(site_counts, v))[s];
            all[v] = now - *p;
            *p = now;
            any = any || all[v] != 0;
        }
        if (!any) {
            continue;
        }
        if (s == 0) {
            fputs("mmio-unplaced", f);
        } else {
            const char *dev = sites[s].device ? sites[s].device : "?";
            fprintf(f, "mmio %" PRIx64 " %c %" PRIx64 " ", sites[s].phys, rw == 1 ? 'w' : 'r', sites[s].pc);
            /* A MemoryRegion name has no spaces in practice; make sure. */
            for (const char *p = dev; *p; p++) {
                fputc(*p == ' ' || *p == '\n' ? '_' : *p, f);
            }
        }
        for (int v = 0; v < ready; v++) {
            fprintf(f, " %" PRIu64, all[v]);
        }
        fputc('\n', f);
    }
    fprintf(f, "end %" PRIu64 "\n", seq_now);
    fclose(f);
    pthread_mutex_unlock(&dumping);
}

/* x86-64: the kernel's half of the address space starts above the canonical hole. */
static int class_of(uint64_t vaddr)
{
    if (vaddr >= idle_start && vaddr < idle_end) {
        return IDLE;
    }
    return vaddr >= 0xffff800000000000ULL ? KERNEL : USER;
}

/* The platform's fixed range below 4 GiB on x86 (q35): IOAPIC at
 * 0xfec00000, HPET at 0xfed00000, the local APIC at 0xfee00000, firmware
 * above. Not PCIe devices: left out of the MMIO counts. */
static bool is_platform(uint64_t phys)
{
    return phys >= 0xfec00000ULL && phys <= 0xffffffffULL;
}

/* ---- the cache model (cache=on|marker; docs/design/counting.md) ----
 *
 * Per vCPU an L1D and an L2, one LLC shared by all: set-associative, 64-byte
 * lines, true LRU, tags only, keyed by the guest physical address. Sizes are
 * those of one core of Intel Ice Lake-SP (3rd generation Xeon Scalable):
 * L1D 48 KiB 12-way, L2 1.25 MiB 20-way, LLC 1.5 MiB per core (scaled by the
 * number of vCPUs) 12-way, non-inclusive: a line from memory goes to L2 and
 * L1D only, the LLC is filled by L2's evictions (a victim cache), and a line
 * that hits in the LLC is copied to L2 and stays in the LLC. A load or a
 * store is one access per line it touches (write-allocate, tags only); a
 * store takes the line out of the other vCPUs' L1D and L2 (coherence); a miss
 * in the LLC that another core's L1D or L2 holds is served on chip and is not
 * an LLC miss. L1D's victims are dropped: L2, filled on every L1D miss,
 * nearly always holds them.
 *
 * Device writes (DMA) are not seen by the plugin. They are found by a byte
 * shadow: for each line the CPUs touched lately (a direct-mapped table of
 * SHADOW_LINES lines), the bytes they loaded or stored, from the access's
 * value (qemu_plugin_mem_get_value). A load that finds a known byte changed
 * with no CPU store in between means a device wrote the line: it is taken
 * out of every L1D and L2 and counted as external, and in the LLC it is
 * either put (with DDIO, the device's write allocates in the LLC: the load
 * then hits there) or taken out (without DDIO: a miss to memory); the two
 * LLCs are kept side by side and differ only there. This is a lower bound:
 * a device write of the same bytes, or of bytes no CPU loaded before, or a
 * line the CPU stores to before loading it, is not seen. A failed
 * compare-and-exchange reports the new value as stored and can be taken for
 * a device write later (rare: contended locks only). x86 guests: values are
 * little-endian. */
enum { CACHE_OFF = 0, CACHE_ON = 1, CACHE_MARKER = 2 };
static int cache_mode = CACHE_OFF;
/* cache=marker: whether the guest armed the model (CACHE_ARM marker; read
 * by every vCPU's callbacks, written by the marker's). */
static bool cache_armed;

#define LINE_SHIFT 6
#define LINE_BYTES (1u << LINE_SHIFT)
/* Intel Ice Lake-SP, one core (see docs/design/counting.md for the sources). */
#define L1D_BYTES (48u * 1024)
#define L1D_WAYS 12
#define L2_BYTES (1280u * 1024)
#define L2_WAYS 20
#define LLC_BYTES_PER_CORE (1536u * 1024)
#define LLC_WAYS 12
/* Lines whose bytes the shadow remembers (a power of two): 16 MiB of lines,
 * above any LLC of the testbed's guests. */
#define SHADOW_LINES (1u << 18)

/* One level: `sets` x `ways` tags (line number + 1; 0: empty way) and, per
 * way, the stamp of its last use: the lowest stamp of a set is its least
 * recently used way (true LRU). */
struct level {
    uint64_t sets, ways, clock;
    uint64_t *tag, *stamp;
};

struct core_caches {
    struct level l1d, l2;
};

struct shadow_line {
    uint64_t line_plus1; /* 0: free */
    uint64_t known;      /* bit i: bytes[i] is what a CPU last loaded or stored */
    uint8_t bytes[LINE_BYTES];
};

static struct core_caches *cores; /* one per vCPU */
static unsigned ncores;
static struct level llc, llc_no_ddio;
static struct shadow_line *shadow;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static bool level_init(struct level *l, uint64_t bytes, uint64_t ways)
{
    l->ways = ways;
    l->sets = bytes / LINE_BYTES / ways;
    l->clock = 0;
    if (l->sets == 0) {
        return false;
    }
    l->tag = calloc(l->sets * ways, sizeof(uint64_t));
    l->stamp = calloc(l->sets * ways, sizeof(uint64_t));
    return l->tag && l->stamp;
}

/* The first way of `line`'s set (index into tag and stamp). */
static uint64_t level_set(const struct level *l, uint64_t line)
{
    return (line % l->sets) * l->ways;
}

/* Whether `l` holds `line`; a hit makes it the set's most recently used. */
static bool level_touch(struct level *l, uint64_t line)
{
    uint64_t base = level_set(l, line);
    for (uint64_t w = base; w < base + l->ways; w++) {
        if (l->tag[w] == line + 1) {
            l->stamp[w] = ++l->clock;
            return true;
        }
    }
    return false;
}

/* Whether `l` holds `line`, its LRU order left as it is. */
static bool level_holds(const struct level *l, uint64_t line)
{
    uint64_t base = level_set(l, line);
    for (uint64_t w = base; w < base + l->ways; w++) {
        if (l->tag[w] == line + 1) {
            return true;
        }
    }
    return false;
}

/* Put `line`, which `l` does not hold, in an empty way or in place of the
 * least recently used; returns the evicted line + 1 (0: none). */
static uint64_t level_fill(struct level *l, uint64_t line)
{
    uint64_t base = level_set(l, line), victim = base;
    for (uint64_t w = base; w < base + l->ways; w++) {
        if (l->tag[w] == 0) {
            victim = w;
            break;
        }
        if (l->stamp[w] < l->stamp[victim]) {
            victim = w;
        }
    }
    uint64_t old = l->tag[victim];
    l->tag[victim] = line + 1;
    l->stamp[victim] = ++l->clock;
    return old;
}

/* Take `line` out of `l`, if there. */
static void level_drop(struct level *l, uint64_t line)
{
    uint64_t base = level_set(l, line);
    for (uint64_t w = base; w < base + l->ways; w++) {
        if (l->tag[w] == line + 1) {
            l->tag[w] = 0;
            l->stamp[w] = 0;
            return;
        }
    }
}

/* `line` becomes the most recently used line of `l`, put there if missing. */
static void level_put(struct level *l, uint64_t line)
{
    if (!level_touch(l, line)) {
        level_fill(l, line);
    }
}

/* Whether a vCPU other than `self` has `line` in its L1D or L2. */
static bool other_core_holds(unsigned self, uint64_t line)
{
    for (unsigned k = 0; k < ncores; k++) {
        if (k != self && (level_holds(&cores[k].l1d, line) || level_holds(&cores[k].l2, line))) {
            return true;
        }
    }
    return false;
}

/* A device wrote `line`: out of every core's L1D and L2; in the LLC with
 * DDIO (the write allocates there), out of it without. */
static void device_wrote(struct counts *c, int cls, uint64_t line)
{
    c->ext_lines[cls]++;
    for (unsigned k = 0; k < ncores; k++) {
        level_drop(&cores[k].l1d, line);
        level_drop(&cores[k].l2, line);
    }
    level_put(&llc, line);
    level_drop(&llc_no_ddio, line);
}

/* The byte shadow of `line` for `n` bytes at `off` (off + n <= LINE_BYTES)
 * with the values `val`: a load that finds a known byte changed reports a
 * device write (see device_wrote) and forgets the rest of the line; then
 * these bytes are known. */
static void shadow_access(struct counts *c, int cls, uint64_t line, unsigned off, unsigned n, const uint8_t *val,
                          bool store)
{
    uint64_t h = (line * 0x9E3779B97F4A7C15ULL) >> 40;
    struct shadow_line *s = &shadow[h & (SHADOW_LINES - 1)];
    if (s->line_plus1 != line + 1) {
        /* Another line had the slot: what was known of it is forgotten. */
        s->line_plus1 = line + 1;
        s->known = 0;
    }
    if (!store) {
        for (unsigned i = 0; i < n; i++) {
            if ((s->known >> (off + i) & 1) && s->bytes[off + i] != val[i]) {
                /* Once per device write: what was known of the line is
                 * stale, and the next loads of its other bytes must not
                 * find the same write again. */
                device_wrote(c, cls, line);
                s->known = 0;
                break;
            }
        }
    }
    memcpy(s->bytes + off, val, n);
    s->known |= (n >= 64 ? ~0ULL : ((1ULL << n) - 1)) << off;
}

/* One access of vCPU `vcpu` to `line` through the levels. */
static void line_access(struct counts *c, unsigned vcpu, int cls, uint64_t line, bool store)
{
    struct core_caches *me = &cores[vcpu];
    if (!level_touch(&me->l1d, line)) {
        c->l1d_miss[cls]++;
        level_fill(&me->l1d, line);
        if (!level_touch(&me->l2, line)) {
            c->l2_miss[cls]++;
            uint64_t victim = level_fill(&me->l2, line);
            bool on_chip = other_core_holds(vcpu, line);
            if (!level_touch(&llc, line) && !on_chip) {
                c->llc_miss[cls]++;
            }
            if (!level_touch(&llc_no_ddio, line) && !on_chip) {
                c->llc_miss_no_ddio[cls]++;
            }
            if (victim) {
                level_put(&llc, victim - 1);
                level_put(&llc_no_ddio, victim - 1);
            }
        }
    }
    if (store) {
        for (unsigned k = 0; k < ncores; k++) {
            if (k != vcpu) {
                level_drop(&cores[k].l1d, line);
                level_drop(&cores[k].l2, line);
            }
        }
    }
}

/* The value of the access `info` as bytes in memory order (little-endian
 * guest); false when its type does not match its size. */
static bool access_bytes(qemu_plugin_meminfo_t info, unsigned size, uint8_t out[16])
{
    qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
    static const unsigned sizes[] = {1, 2, 4, 8, 16};
    if ((unsigned)v.type > MEM_VALUE_U128 || sizes[v.type] != size) {
        return false;
    }
    switch (v.type) {
    case MEM_VALUE_U8:
        out[0] = v.data.u8;
        break;
    case MEM_VALUE_U16:
        memcpy(out, &v.data.u16, 2);
        break;
    case MEM_VALUE_U32:
        memcpy(out, &v.data.u32, 4);
        break;
    case MEM_VALUE_U64:
        memcpy(out, &v.data.u64, 8);
        break;
    case MEM_VALUE_U128:
        memcpy(out, &v.data.u128.low, 8);
        memcpy(out + 8, &v.data.u128.high, 8);
        break;
    }
    return true;
}

/* A RAM access of `size` bytes at guest physical `phys` (virtual `vaddr`):
 * the shadow and (when `levels`) the levels for each line it touches (two
 * when it crosses a line boundary; the second line's address is looked up
 * again when the access also crosses a page). A store outside the marked
 * regions of cache=marker updates the shadow only, so that the CPU's own
 * writes there are never taken for a device's. */
static void cache_access(struct counts *c, unsigned vcpu, int cls, qemu_plugin_meminfo_t info, uint64_t vaddr,
                         uint64_t phys, unsigned size, bool store, bool levels)
{
    if (vcpu >= ncores) {
        return;
    }
    uint8_t val[16];
    bool have_val = size <= sizeof val && access_bytes(info, size, val);
    unsigned off = phys & (LINE_BYTES - 1);
    unsigned first = size < LINE_BYTES - off ? size : LINE_BYTES - off;
    uint64_t phys2 = 0;
    if (first < size) {
        uint64_t v2 = vaddr + first;
        if ((v2 >> 12) == (vaddr >> 12)) {
            phys2 = phys + first;
        } else {
            struct qemu_plugin_hwaddr *hw2 = qemu_plugin_get_hwaddr(info, v2);
            if (hw2 && !qemu_plugin_hwaddr_is_io(hw2)) {
                phys2 = qemu_plugin_hwaddr_phys_addr(hw2);
            }
        }
    }
    pthread_mutex_lock(&cache_lock);
    if (have_val) {
        shadow_access(c, cls, phys >> LINE_SHIFT, off, first, val, store);
    }
    if (levels) {
        line_access(c, vcpu, cls, phys >> LINE_SHIFT, store);
    }
    if (phys2) {
        unsigned rest = size - first;
        if (have_val && rest <= LINE_BYTES) {
            shadow_access(c, cls, phys2 >> LINE_SHIFT, phys2 & (LINE_BYTES - 1), rest, val + first, store);
        }
        if (levels) {
            line_access(c, vcpu, cls, phys2 >> LINE_SHIFT, store);
        }
    }
    pthread_mutex_unlock(&cache_lock);
}

/* Build the levels and the shadow for `n` vCPUs; false when out of memory. */
static bool cache_init(unsigned n)
{
    ncores = n;
    cores = calloc(n, sizeof *cores);
    shadow = calloc(SHADOW_LINES, sizeof *shadow);
    if (!cores || !shadow) {
        return false;
    }
    for (unsigned k = 0; k < n; k++) {
        if (!level_init(&cores[k].l1d, L1D_BYTES, L1D_WAYS) || !level_init(&cores[k].l2, L2_BYTES, L2_WAYS)) {
            return false;
        }
    }
    return level_init(&llc, (uint64_t)LLC_BYTES_PER_CORE * n, LLC_WAYS) &&
           level_init(&llc_no_ddio, (uint64_t)LLC_BYTES_PER_CORE * n, LLC_WAYS);
}

/* Memory callbacks: udata is the instruction's address (its class, user or
 * kernel, follows from it; the idle loop is never instrumented). */
static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata, bool store)
{
    if (!vcpu_known(vcpu)) {
        return;
    }
    struct counts *c = qemu_plugin_scoreboard_find(board, vcpu);
    uint64_t pc = (uintptr_t)udata;
    int cls = pc >= 0xffff800000000000ULL ? KERNEL : USER;
    uint64_t size = 1u << qemu_plugin_mem_size_shift(info);
    if (store) {
        c->stored[cls] += size;
    } else {
        c->loaded[cls] += size;
    }
    /* cache=marker: the levels inside marked regions, the shadow for every
     * store (see cache_access). */
    bool armed = cache_mode == CACHE_MARKER && __atomic_load_n(&cache_armed, __ATOMIC_RELAXED);
    bool levels = cache_mode == CACHE_ON || (armed && c->open);
    bool model = levels || (armed && store);
    if (!count_mmio && !model) {
        return;
    }
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw) {
        return;
    }
    if (!qemu_plugin_hwaddr_is_io(hw)) {
        if (model) {
            cache_access(c, vcpu, cls, info, vaddr, qemu_plugin_hwaddr_phys_addr(hw), (unsigned)size, store,
                         levels);
        }
        return;
    }
    if (!count_mmio) {
        return;
    }
    uint64_t phys = qemu_plugin_hwaddr_phys_addr(hw);
    if (is_platform(phys)) {
        return;
    }
    if (store) {
        c->mmio_w[cls]++;
        c->mmio_wb[cls] += size;
    } else {
        c->mmio_r[cls]++;
        c->mmio_rb[cls] += size;
    }
    if (prof_slots) {
        uint64_t slot = site_slot(phys, pc, store, qemu_plugin_hwaddr_device_name(hw));
        ((uint64_t *)qemu_plugin_scoreboard_find(site_counts, vcpu))[slot]++;
    }
}

static void on_load(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    on_access(vcpu, info, vaddr, udata, false);
}

static void on_store(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    on_access(vcpu, info, vaddr, udata, true);
}

static uint64_t mmio_reads(const struct counts *c)
{
    return c->mmio_r[USER] + c->mmio_r[KERNEL];
}

static uint64_t mmio_writes(const struct counts *c)
{
    return c->mmio_w[USER] + c->mmio_w[KERNEL];
}

/* ---- which process runs: CR3, read at the marker and at every task switch ---- */
static uint64_t switch_addr; /* finish_task_switch (0: not tracked) */
static struct qemu_plugin_register *cr3_reg;

/* CR3 without its PCID (bits 11:0) and the page-table-isolation user bit (12):
 * the same for a process in user and in kernel mode. 0 when unreadable. */
static uint64_t read_cr3(void)
{
    static __thread GByteArray *buf;
    if (!cr3_reg) {
        return 0;
    }
    if (!buf) {
        buf = g_byte_array_new();
    }
    g_byte_array_set_size(buf, 0);
    if (qemu_plugin_read_register(cr3_reg, buf) < 8 || buf->len < 8) {
        return 0;
    }
    uint64_t v;
    memcpy(&v, buf->data, 8);
    return v & 0x7fffffffffffe000ULL;
}

/* A task switch on `vcpu` (the new task's address space is loaded): a region
 * whose process is switched out pauses, and resumes, with what ran meanwhile
 * left out, when its process is switched back in. Kernel threads keep the
 * previous address space, so the kernel work they do there stays counted. */
static void on_switch(unsigned int vcpu, void *udata)
{
    if (!vcpu_known(vcpu)) {
        return;
    }
    struct counts *c = qemu_plugin_scoreboard_find(board, vcpu);
    (void)udata;
    if (!c->open && !c->paused) {
        return;
    }
    uint64_t cr3 = read_cr3();
    if (c->open && cr3 != c->region_cr3) {
        c->open = 0;
        c->paused = 1;
        c->pause_insns = c->insns[USER] + c->insns[KERNEL];
        c->pause_user = c->insns[USER];
        c->pause_loaded = c->loaded[USER] + c->loaded[KERNEL];
        c->pause_stored = c->stored[USER] + c->stored[KERNEL];
        c->pause_mmio_r = mmio_reads(c);
        c->pause_mmio_w = mmio_writes(c);
        c->pauses++;
    } else if (c->paused && cr3 == c->region_cr3) {
        c->start_insns += c->insns[USER] + c->insns[KERNEL] - c->pause_insns;
        c->start_user += c->insns[USER] - c->pause_user;
        c->start_loaded += c->loaded[USER] + c->loaded[KERNEL] - c->pause_loaded;
        c->start_stored += c->stored[USER] + c->stored[KERNEL] - c->pause_stored;
        c->start_mmio_r += mmio_reads(c) - c->pause_mmio_r;
        c->start_mmio_w += mmio_writes(c) - c->pause_mmio_w;
        c->paused = 0;
        c->open = 1;
    }
}

static void on_mark(unsigned int vcpu, void *udata)
{
    if (!vcpu_known(vcpu)) {
        return;
    }
    struct counts *c = qemu_plugin_scoreboard_find(board, vcpu);
    uint64_t insns = c->insns[USER] + c->insns[KERNEL];
    uint64_t loaded = c->loaded[USER] + c->loaded[KERNEL];
    uint64_t stored = c->stored[USER] + c->stored[KERNEL];
    switch ((uintptr_t)udata) {
    case MARK_BEGIN:
        c->start_user = c->insns[USER];
        c->start_insns = insns;
        c->start_loaded = loaded;
        c->start_stored = stored;
        c->start_mmio_r = mmio_reads(c);
        c->start_mmio_w = mmio_writes(c);
        c->open = 1;
        c->paused = 0;
        c->region_cr3 = switch_addr ? read_cr3() : 0;
        region_begin(vcpu);
        break;
    case MARK_COMMIT:
    case MARK_COMMIT_ONE:
        if (c->open) {
            c->marked_insns += insns - c->start_insns;
            c->marked_loaded += loaded - c->start_loaded;
            c->marked_stored += stored - c->start_stored;
            c->marks++;
            c->marked_user += c->insns[USER] - c->start_user;
            c->marked_mmio_r += mmio_reads(c) - c->start_mmio_r;
            c->marked_mmio_w += mmio_writes(c) - c->start_mmio_w;
            if ((uintptr_t)udata == MARK_COMMIT_ONE) {
                c->one_mmio_r += mmio_reads(c) - c->start_mmio_r;
                c->one_mmio_w += mmio_writes(c) - c->start_mmio_w;
                c->one_user += c->insns[USER] - c->start_user;
                c->one_insns += insns - c->start_insns;
                c->one_loaded += loaded - c->start_loaded;
                c->one_stored += stored - c->start_stored;
                c->ones++;
            }
            region_commit(vcpu);
        }
        c->open = 0;
        c->paused = 0;
        break;
    case MARK_PROFILE:
        dump_profile();
        break;
    case MARK_CACHE_ARM:
    case MARK_CACHE_DISARM:
        /* The shadow starts empty at each arming: bytes a CPU wrote while
         * the model was off are unknown to it, so they cannot be taken for a
         * device's writes. */
        if (cache_mode == CACHE_MARKER) {
            pthread_mutex_lock(&cache_lock);
            memset(shadow, 0, SHADOW_LINES * sizeof *shadow);
            __atomic_store_n(&cache_armed, (uintptr_t)udata == MARK_CACHE_ARM, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&cache_lock);
        }
        break;
    default:
        c->open = 0;
        c->paused = 0;
        break;
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    int cls = class_of(qemu_plugin_tb_vaddr(tb));
    qemu_plugin_u64 entry = {board, offsetof(struct counts, insns) + cls * sizeof(uint64_t)};
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, INLINE_ADD_U64, entry, n);
    if (cls == IDLE) {
        return;
    }
    if (prof_slots) {
        uint64_t slot = prof_slot(qemu_plugin_tb_vaddr(tb));
        qemu_plugin_u64 all = {prof_all, slot * sizeof(uint64_t)};
        qemu_plugin_u64 open = {board, offsetof(struct counts, open)};
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, INLINE_ADD_U64, all, n);
        qemu_plugin_register_vcpu_tb_exec_cond_cb(tb, on_region_tb, CB_NO_REGS, COND_NE, open, 0,
                                                  (void *)(uintptr_t)(slot << 16 | n));
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        int mark = cls == USER ? marker_of(insn) : 0;
        if (mark) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, switch_addr ? CB_R_REGS : CB_NO_REGS,
                                                   (void *)(uintptr_t)mark);
        }
        if (i == 0 && switch_addr && qemu_plugin_tb_vaddr(tb) == switch_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_switch, CB_R_REGS, NULL);
        }
        if (!count_mem) {
            continue;
        }
        void *pc = (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn);
        qemu_plugin_register_vcpu_mem_cb(insn, on_load, CB_NO_REGS, MEM_R, pc);
        qemu_plugin_register_vcpu_mem_cb(insn, on_store, CB_NO_REGS, MEM_W, pc);
    }
}

/* The file: a header line, one line per vCPU, an end line; numbers at fixed
 * width so every rewrite has the same length and covers the previous one. */
static void dump(void)
{
    /* Called by the writer thread, and at exit after it stopped. */
    static char buf[256 + (704 + 256) * 64];
    size_t len = 0;
    seq++;
    len += snprintf(buf + len, sizeof buf - len, "pollnic-count 5 seq %020" PRIu64 " vcpus %03d%s\n", seq,
                    vcpus,
                    cache_mode == CACHE_ON       ? " cache on"
                    : cache_mode == CACHE_MARKER ? " cache marker"
                                                 : "");
    int ready = __atomic_load_n(&vcpus_ready, __ATOMIC_ACQUIRE);
    for (int v = 0; v < vcpus && v < 64; v++) {
        static const struct counts none;
        const struct counts *c = v < ready ? qemu_plugin_scoreboard_find(board, v) : &none;
        len += snprintf(buf + len, sizeof buf - len,
                        "cpu %03d %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64
                        " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64
                        " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64
                        " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64
                        " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64
                        " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 "\n",
                        v, c->insns[USER], c->insns[KERNEL], c->insns[IDLE], c->loaded[USER],
                        c->stored[USER], c->loaded[KERNEL], c->stored[KERNEL], c->marked_insns,
                        c->marked_loaded, c->marked_stored, c->marks, c->one_insns, c->one_loaded,
                        c->one_stored, c->ones, c->marked_user, c->one_user, c->mmio_r[USER],
                        c->mmio_w[USER], c->mmio_rb[USER], c->mmio_wb[USER], c->mmio_r[KERNEL],
                        c->mmio_w[KERNEL], c->mmio_rb[KERNEL], c->mmio_wb[KERNEL], c->marked_mmio_r,
                        c->marked_mmio_w, c->one_mmio_r, c->one_mmio_w);
    }
    /* The cache model's lines, only when it is on: user, then kernel, each
     * L1D, L2, LLC misses, LLC misses without DDIO, external lines. */
    for (int v = 0; cache_mode != CACHE_OFF && v < vcpus && v < 64; v++) {
        static const struct counts none;
        const struct counts *c = v < ready ? qemu_plugin_scoreboard_find(board, v) : &none;
        len += snprintf(buf + len, sizeof buf - len,
                        "cache %03d %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64
                        " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 " %020" PRIu64 "\n",
                        v, c->l1d_miss[USER], c->l2_miss[USER], c->llc_miss[USER], c->llc_miss_no_ddio[USER],
                        c->ext_lines[USER], c->l1d_miss[KERNEL], c->l2_miss[KERNEL], c->llc_miss[KERNEL],
                        c->llc_miss_no_ddio[KERNEL], c->ext_lines[KERNEL]);
    }
    len += snprintf(buf + len, sizeof buf - len, "end %020" PRIu64 "\n", seq);
    if (pwrite(out_fd, buf, len, 0) != (ssize_t)len) {
        /* A full disk or a removed share: the reader sees a stale seq. */
    }
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (switch_addr && !__atomic_load_n(&cr3_reg, __ATOMIC_ACQUIRE)) {
        GArray *regs = qemu_plugin_get_registers();
        for (unsigned int i = 0; regs && i < regs->len; i++) {
            qemu_plugin_reg_descriptor *d = &((qemu_plugin_reg_descriptor *)regs->data)[i];
            if (d->name && strcmp(d->name, "cr3") == 0) {
                __atomic_store_n(&cr3_reg, d->handle, __ATOMIC_RELEASE);
                break;
            }
        }
        if (!cr3_reg) {
            qemu_plugin_outs("pollnic-count: no cr3 register: marked regions also count other processes\n");
        }
    }
    /* vCPUs come up in index order; a scoreboard entry exists once its vCPU is initialised. */
    int want = (int)vcpu + 1;
    int cur = __atomic_load_n(&vcpus_ready, __ATOMIC_ACQUIRE);
    while (cur < want && !__atomic_compare_exchange_n(&vcpus_ready, &cur, want, false, __ATOMIC_RELEASE,
                                                      __ATOMIC_ACQUIRE)) {
    }
}

static void *write_loop(void *arg)
{
    struct timespec ts = {0, (long)period_us * 1000};
    (void)arg;
    while (!stopping) {
        dump();
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    stopping = true;
    pthread_join(writer, NULL);
    dump();
    close(out_fd);
}

static bool parse_u64(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    *out = strtoull(text, &end, 0);
    return errno == 0 && end != text && *end == '\0';
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *out = NULL;
    char msg[512];
    if (!info->system_emulation) {
        qemu_plugin_outs("pollnic-count: needs system emulation\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (strncmp(a, "out=", 4) == 0) {
            out = a + 4;
        } else if (strncmp(a, "idle_start=", 11) == 0 && parse_u64(a + 11, &v)) {
            idle_start = v;
        } else if (strncmp(a, "idle_end=", 9) == 0 && parse_u64(a + 9, &v)) {
            idle_end = v;
        } else if (strcmp(a, "mem=on") == 0 || strcmp(a, "mem=off") == 0) {
            count_mem = a[5] == 'n';
        } else if (strcmp(a, "mmio=on") == 0 || strcmp(a, "mmio=off") == 0) {
            count_mmio = a[6] == 'n';
        } else if (strcmp(a, "cache=on") == 0) {
            cache_mode = CACHE_ON;
        } else if (strcmp(a, "cache=marker") == 0) {
            cache_mode = CACHE_MARKER;
        } else if (strcmp(a, "cache=off") == 0) {
            cache_mode = CACHE_OFF;
        } else if (strncmp(a, "switch=", 7) == 0 && parse_u64(a + 7, &v)) {
            switch_addr = v;
        } else if (strncmp(a, "profile=", 8) == 0 && parse_u64(a + 8, &v) && (v == 0 || (v >= 1024 && v <= (1u << 24) && (v & (v - 1)) == 0))) {
            prof_slots = v;
        } else if (strncmp(a, "period_us=", 10) == 0 && parse_u64(a + 10, &v) && v >= 100 && v <= 1000000) {
            period_us = (unsigned)v;
        } else {
            snprintf(msg, sizeof msg, "pollnic-count: unknown or bad argument `%s`\n", a);
            qemu_plugin_outs(msg);
            return -1;
        }
    }
    if (!out) {
        qemu_plugin_outs("pollnic-count: out=PATH is required\n");
        return -1;
    }
    if (idle_end < idle_start) {
        qemu_plugin_outs("pollnic-count: idle_end is below idle_start\n");
        return -1;
    }
    if (cache_mode != CACHE_OFF && !count_mem) {
        qemu_plugin_outs("pollnic-count: cache= needs mem=on (the model sees the memory accesses)\n");
        return -1;
    }
    out_fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
        snprintf(msg, sizeof msg, "pollnic-count: cannot open %s: %s\n", out, strerror(errno));
        qemu_plugin_outs(msg);
        return -1;
    }
    vcpus = info->system.smp_vcpus;
    board = qemu_plugin_scoreboard_new(sizeof(struct counts));
    if (cache_mode != CACHE_OFF) {
        if (vcpus < 1 || !cache_init((unsigned)vcpus)) {
            qemu_plugin_outs("pollnic-count: no memory for the cache model\n");
            return -1;
        }
        snprintf(msg, sizeof msg,
                 "pollnic-count: cache model %s: per vCPU L1D %u KiB %u-way, L2 %u KiB %u-way; LLC %" PRIu64
                 " KiB %u-way shared (Ice Lake-SP), 64-byte lines\n",
                 cache_mode == CACHE_ON ? "on" : "in marked regions", L1D_BYTES / 1024, L1D_WAYS,
                 L2_BYTES / 1024, L2_WAYS, (uint64_t)LLC_BYTES_PER_CORE * (unsigned)vcpus / 1024, LLC_WAYS);
        qemu_plugin_outs(msg);
    }
    if (prof_slots) {
        if (snprintf(prof_path, sizeof prof_path, "%s.prof", out) >= (int)sizeof prof_path) {
            qemu_plugin_outs("pollnic-count: out= path too long\n");
            return -1;
        }
        prof_keys = calloc(prof_slots, sizeof(uint64_t));
        prev_all = calloc(prof_slots * (vcpus < 64 ? vcpus : 64), sizeof(uint64_t));
        prev_marked = calloc(prof_slots * (vcpus < 64 ? vcpus : 64), sizeof(uint64_t));
        if (!prof_keys || !prev_all || !prev_marked) {
            qemu_plugin_outs("pollnic-count: no memory for the profile\n");
            return -1;
        }
        prof_all = qemu_plugin_scoreboard_new(prof_slots * sizeof(uint64_t));
        prof_marked = qemu_plugin_scoreboard_new(prof_slots * sizeof(uint64_t));
        logs = qemu_plugin_scoreboard_new(sizeof(struct region_log));
        site_counts = qemu_plugin_scoreboard_new(SITES * sizeof(uint64_t));
        prev_sites = calloc(SITES * (vcpus < 64 ? vcpus : 64), sizeof(uint64_t));
        if (!prev_sites) {
            qemu_plugin_outs("pollnic-count: no memory for the MMIO sites\n");
            return -1;
        }
    }
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    if (pthread_create(&writer, NULL, write_loop, NULL) != 0) {
        qemu_plugin_outs("pollnic-count: cannot start the writer thread\n");
        return -1;
    }
    return 0;
}
