#!/usr/bin/env python3
"""Split each interrupt row's instructions per wake-up into the kernel's
parts and pollnic's, from a compare JSON's per-function profile
(`compare --top-functions N`, all instructions of the receiving vCPUs).

Usage: split.py load-curve.json [path ...]   (rows named `path` or `path-eitrN`)

Prints a Markdown table: instructions per wake-up (the row's figure per
received packet over its wake-ups per packet; for the kernel's rows a
wake-up is a NET_RX softirq). Functions are grouped by name, kernel symbols
(from the guest's kallsyms) by the patterns below, first match wins; user
symbols are pollnic's (`pollnic::`, `pollnic_rings::`) or the tool's.
"""
import json, re, sys

KERNEL_GROUPS = [
    ("receive: NAPI poll, igb, XDP redirect, AF_XDP",
     r"igb_|xdp|xsk|xp_|napi|net_rx|softirq|bpf|skb|netif|_find_next_bit|page_pool|dma_"),
    ("spin locks (taken on every path)", r"spin_lock|spin_unlock|_raw_"),
    ("scheduler: wake-up, context switch",
     r"sched|switch|psi_|load_avg|update_curr|enqueue|dequeue|pick_|set_next|put_prev|ttwu|try_to_wake|select_task_rq|rq_clock|cpuacct|account|balance|_fair|_dl_|_rt_|idle|resched|prepare_task|finish_task|update_rq|vruntime|place_entity|update_se|record_times|update_min|reweight|hrtick"),
    ("timer tick and other background",
     r"tick|hrtimer_interrupt|rcu_sched_clock_irq|rcu_core|timekeeping|watchdog|update_wall|run_timer|ktime_get_update|update_process_times|clockevents|lapic_next"),
    ("interrupt: entry, vfio handler, eventfd signal",
     r"irq|vfio|eventfd_signal|apic|msi|sysvec|interrupt|idtentry|handle_edge|pollwake|__wake_up|fast_mix|randomness|error_entry|error_return"),
    ("system calls: poll(2), read(2) of the eventfd",
     r"poll|vfs_read|eventfd|ksys_read|fdget|fput|syscall|entry_SYSCALL|x64_sys|copy_to|copy_from|_copy|hrtimer|timerqueue|estimate_accuracy|ktime_get_ts|prandom|rseq|exit_to_user|fpregs|fpu|rw_verify|file_perm|fsnotify|check_object_size|wait_queue|rcu_read"),
]

def kernel_group(name):
    for label, pat in KERNEL_GROUPS:
        if re.search(pat, name):
            return label
    return "other kernel"

def is_kernel(name):
    # user symbols are Rust paths, [user], or shared-library names in brackets
    if name.startswith("[user]") or "::" in name or name.startswith("[lib") or name.startswith("<"):
        return False
    if name.startswith("[") and name.endswith("]"):
        return False
    return True

def user_group(name):
    if re.search(r"\bpollnic::|pollnic_rings::", name) and "pollnic_tools" not in name:
        return "pollnic: burst, re-arm, sleep"
    return "the tool: frame parse, latency record, loop"

COLS = [
    "interrupt: entry, vfio handler, eventfd signal",
    "scheduler: wake-up, context switch",
    "system calls: poll(2), read(2) of the eventfd",
    "spin locks (taken on every path)",
    "timer tick and other background",
    "other kernel",
    "receive: NAPI poll, igb, XDP redirect, AF_XDP",
]
SHORT = ["interrupt", "scheduler", "poll + read", "spin locks", "tick", "other", "NAPI/XDP"]


def split(r):
    """Instructions per received packet by group: {(side, group): insn/pkt}."""
    groups = {}
    for f in r["top_functions"]:
        name, x = f["function"], f["instructions_per_packet"]
        g = ("kernel", kernel_group(name)) if is_kernel(name) else ("user", user_group(name))
        groups[g] = groups.get(g, 0.0) + x
    return groups


def main():
    rows = json.load(open(sys.argv[1]))
    if isinstance(rows, dict):  # a load curve: its points
        rows = rows["points"]
    want = sys.argv[2:] or ["pollnic-1q-irq", "pollnic-1q-adaptive", "kernel-afxdp"]
    print("| asked pps | path | wake-ups/pkt | " + " | ".join(SHORT)
          + " | kernel | pollnic: burst, re-arm, sleep | listed/counted |")
    print("|---" * (len(SHORT) + 6) + "|")
    for r in rows:
        if not r.get("valid") or r["path"] not in want and not any(
                r["path"].startswith(w + "-eitr") for w in want):
            continue
        w = r.get("wakeups_per_packet")
        if not w or not r.get("top_functions"):
            continue
        g = split(r)
        k = [g.get(("kernel", c), 0.0) / w for c in COLS]
        pn = g.get(("user", "pollnic: burst, re-arm, sleep"), 0.0) / w
        listed = sum(g.values()) / (r.get("instructions_per_packet") or 1)
        print(f"| {r.get('asked_pps', '-'):,} | {r['path']} | {w:.3f} | "
              + " | ".join(f"{x:,.0f}" for x in k)
              + f" | **{sum(k):,.0f}** | {pn:,.0f} | {100 * listed:.0f} % |")


main()
