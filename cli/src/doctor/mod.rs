//! `pollnic doctor`: checks the host for what pollnic needs and says, for
//! every finding, whether it is ok, worth a warning, or a failure, with the
//! exact command that fixes it.
//!
//! [`facts::gather`] reads the machine once; [`checks::run`] turns the facts
//! into [`Finding`]s with pure functions (unit-tested on made-up facts);
//! [`report`] prints them as text or JSON.

pub mod checks;
pub mod facts;
pub mod report;
pub mod selfcheck;

#[cfg(test)]
mod tests;

pub use checks::run;
pub use facts::{gather, Need, Roots};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// pollnic works, but not as well as it could (or something may bite later).
    Warn,
    /// pollnic will not work until this is fixed.
    Fail,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        })
    }
}

/// One thing doctor checked.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// What was checked: `iommu`, `vfio-pci`, `hugepages`, `memlock`,
    /// `/dev/vfio`, `port <addr>`, `core <n>`, `irqbalance`.
    pub area: String,
    /// Ok, warn or fail.
    pub status: Status,
    /// What was found, in one sentence or two.
    pub detail: String,
    /// The command (or edit) that fixes it; `None` when ok.
    pub fix: Option<String>,
}

impl Finding {
    /// An ok finding.
    pub fn ok(area: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding {
            area: area.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }
    /// A warning with its fix.
    pub fn warn(
        area: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            area: area.into(),
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
    /// A failure with its fix.
    pub fn fail(
        area: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            area: area.into(),
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}
