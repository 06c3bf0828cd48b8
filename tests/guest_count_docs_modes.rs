//! The commands of docs/tools/compare.md with --sweep, --load-curve, --forward and --top-functions, run in the counting
//! guest in a short form: see `tests/guest_count_docs.rs` and
//! `pollnic_tests::compare_page`.

use pollnic_tests::compare_page::*;

#[test]
#[ignore = "needs the QEMU testbed with the counter: run `cargo xtask test`"]
fn the_pages_commands_run_and_give_a_pollnic_row() {
    assert!(run_part(Part::IgbModes) >= 4);
}
