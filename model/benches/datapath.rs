//! Per-packet cost of pollnic's data path on the software device model (no
//! hardware): RX+TX forwarding at bursts 1, 8, 32 and 128, RX-only and
//! TX-only at burst 32, each on the scalar and on the vector burst loops side
//! by side (`<group>/scalar/<burst>`, `<group>/vector/<burst>`), mempool
//! get/put, and the software Toeplitz hash.
//!
//! Only the driver's side is timed: the model's work (writing frames into RX
//! buffers, consuming TX descriptors) happens outside the timed sections.
//! Throughput is in elements, so criterion reports packets/s.
//!
//! `cargo bench -p pollnic-rings --bench datapath`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pollnic_hw::rss::{FlowKey, Toeplitz, L4, MICROSOFT_KEY};
use pollnic_model::fwd::FwdRig;
use pollnic_rings::dma::{IdentityMapper, PageSize};
use pollnic_rings::{DataPath, Mempool};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RING: u16 = 512;

/// The paths this CPU runs: scalar always, vector where detected.
fn paths() -> Vec<DataPath> {
    let mut v = vec![DataPath::Scalar];
    if DataPath::vector_supported() {
        v.push(DataPath::Vector);
    }
    v
}

/// A forwarding rig on `path`'s burst loops.
fn rig(path: DataPath) -> FwdRig {
    let mut rig = FwdRig::new(RING, 60);
    rig.set_data_path(path);
    rig
}

fn forwarding(c: &mut Criterion) {
    let mut g = c.benchmark_group("fwd_rx_tx");
    for batch in [1usize, 8, 32, 128] {
        for path in paths() {
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_with_input(BenchmarkId::new(path.name(), batch), &batch, |b, &batch| {
                let mut rig = rig(path);
                let per_round = rig.bursts_per_round(batch);
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let k = (left as usize).min(per_round);
                        rig.deliver(k * batch);
                        let t = Instant::now();
                        for _ in 0..k {
                            black_box(rig.forward_burst(batch));
                        }
                        total += t.elapsed();
                        rig.complete_tx();
                        left -= k as u64;
                    }
                    total
                });
            });
        }
    }
    g.finish();
}

fn rx_only(c: &mut Criterion) {
    let mut g = c.benchmark_group("rx_only");
    g.throughput(Throughput::Elements(32));
    for path in paths() {
        g.bench_function(BenchmarkId::new(path.name(), 32), |b| {
            let mut rig = rig(path);
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let k = (left as usize).min(rig.bursts_per_round(32));
                    rig.deliver(k * 32);
                    let t = Instant::now();
                    for _ in 0..k {
                        let (rx, _, burst) = rig.parts();
                        rx.rx_burst(burst, 32);
                        // An rxonly app returns each burst in bulk to its queue's cache.
                        rx.cache_mut().free_bulk(burst);
                    }
                    total += t.elapsed();
                    left -= k as u64;
                }
                total
            });
        });
    }
    g.finish();
}

fn tx_only(c: &mut Criterion) {
    let mut g = c.benchmark_group("tx_only");
    g.throughput(Throughput::Elements(32));
    for path in paths() {
        g.bench_function(BenchmarkId::new(path.name(), 32), |b| {
            let mut rig = rig(path);
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (rx, tx, burst) = rig.parts();
                    rx.cache_mut().alloc_burst(burst, 32);
                    for p in burst.iter_mut() {
                        p.set_len(60).unwrap();
                    }
                    let t = Instant::now();
                    black_box(tx.tx_burst(burst, rx.cache_mut()));
                    total += t.elapsed();
                    rig.complete_tx();
                }
                total
            });
        });
    }
    g.finish();
}

fn mempool(c: &mut Criterion) {
    let pool = Mempool::new(1024, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    let mut g = c.benchmark_group("mempool");
    g.throughput(Throughput::Elements(1));
    g.bench_function("get_put", |b| b.iter(|| drop(black_box(pool.alloc()))));
    g.finish();
}

fn toeplitz(c: &mut Criterion) {
    let t = Toeplitz::new(&MICROSOFT_KEY);
    let v4 = FlowKey::V4 {
        src: [66, 9, 149, 187].into(),
        dst: [161, 142, 100, 80].into(),
        sport: 2794,
        dport: 1766,
        l4: L4::Tcp,
    };
    let v6 = FlowKey::V6 {
        src: "3ffe:2501:200:1fff::7".parse().unwrap(),
        dst: "3ffe:2501:200:3::1".parse().unwrap(),
        sport: 2794,
        dport: 1766,
        l4: L4::Tcp,
    };
    let mut g = c.benchmark_group("toeplitz");
    g.throughput(Throughput::Elements(1));
    g.bench_function("tcp_ipv4", |b| b.iter(|| t.hash_flow(black_box(&v4))));
    g.bench_function("tcp_ipv6", |b| b.iter(|| t.hash_flow(black_box(&v6))));
    g.finish();
}

criterion_group!(benches, forwarding, rx_only, tx_only, mempool, toeplitz);
criterion_main!(benches);
