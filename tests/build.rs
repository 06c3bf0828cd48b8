//! Makes every page of README.md and docs/ a rustdoc doc-test input of this
//! package's library (`cargo test -p pollnic-tests --doc`): each ```rust
//! block of a page is compiled (and run unless marked `no_run`), and an
//! untagged block counts as Rust, so a block that is not Rust says what it
//! is (```text, ```sh, ...). A page added later is picked up without a
//! change here.

use std::fs;
use std::path::{Path, PathBuf};

fn pages(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            pages(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let mut found = vec![repo.join("README.md")];
    pages(&repo.join("docs"), &mut found);
    found.sort();
    let mut text = String::new();
    for (i, page) in found.iter().enumerate() {
        let rel = page.strip_prefix(&repo).unwrap().display();
        text.push_str(&format!(
            "/// `{rel}`\n#[doc = include_str!({:?})]\npub struct Page{i};\n",
            page.display().to_string()
        ));
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("doc_pages.rs");
    fs::write(out, text).unwrap();
    println!(
        "cargo:rerun-if-changed={}",
        repo.join("README.md").display()
    );
    println!("cargo:rerun-if-changed={}", repo.join("docs").display());
    for p in &found {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
