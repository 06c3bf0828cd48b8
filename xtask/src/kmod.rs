//! Kernel module bookkeeping: `modules.dep` / `modules.builtin` of an unpacked kernel, and the
//! dependency-ordered closure of the modules the guest needs.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// A module the guest wants.
#[derive(Debug, Clone, Copy)]
pub struct Want {
    /// Module name; `-` and `_` are interchangeable, as for modprobe.
    pub name: &'static str,
    /// If true, a module that neither exists nor is built in is skipped (e.g. `vfio_virqfd`,
    /// folded into `vfio` in later kernels) instead of being an error.
    pub optional: bool,
}

/// The index of an unpacked kernel's modules.
#[derive(Debug, Default)]
pub struct ModuleIndex {
    /// Module name → (path relative to `lib/modules/<version>`, direct-or-transitive deps).
    modules: HashMap<String, (String, Vec<String>)>,
    /// Names of modules built into the kernel image.
    builtin: HashSet<String>,
}

/// Canonical module name of a path like `kernel/drivers/vfio/pci/vfio-pci.ko.xz`.
pub fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

impl ModuleIndex {
    /// Reads `modules.dep` and `modules.builtin` from `lib/modules/<version>`.
    pub fn load(dir: &Path) -> Result<Self> {
        let dep_path = dir.join("modules.dep");
        let dep = fs::read_to_string(&dep_path)
            .with_context(|| format!("reading {} (did depmod run?)", dep_path.display()))?;
        let builtin = fs::read_to_string(dir.join("modules.builtin")).unwrap_or_default();
        Ok(Self::parse(&dep, &builtin))
    }

    /// Builds the index from the texts of `modules.dep` and `modules.builtin`.
    pub fn parse(modules_dep: &str, modules_builtin: &str) -> Self {
        let mut modules = HashMap::new();
        for line in modules_dep.lines() {
            let Some((path, deps)) = line.split_once(':') else {
                continue;
            };
            let deps = deps.split_whitespace().map(module_name).collect();
            modules.insert(module_name(path), (path.trim().to_owned(), deps));
        }
        let builtin = modules_builtin
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(module_name)
            .collect();
        Self { modules, builtin }
    }

    /// True if the module is compiled into the kernel image.
    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&name.replace('-', "_"))
    }

    /// The module files (relative paths) to load, dependencies first, for all of `wants`.
    ///
    /// Built-in modules are skipped; a missing non-optional module is an error.
    pub fn resolve(&self, wants: &[Want]) -> Result<Vec<String>> {
        let mut order = Vec::new();
        let mut done = HashSet::new();
        for want in wants {
            let name = want.name.replace('-', "_");
            if self.modules.contains_key(&name) {
                self.visit(&name, &mut done, &mut Vec::new(), &mut order)?;
            } else if !self.is_builtin(&name) && !want.optional {
                bail!(
                    "kernel module {} is neither in modules.dep nor built in: \
                     this kernel cannot run the testbed",
                    want.name
                );
            }
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        done: &mut HashSet<String>,
        stack: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> Result<()> {
        if done.contains(name) {
            return Ok(());
        }
        if stack.iter().any(|s| s == name) {
            bail!("module dependency cycle: {} -> {name}", stack.join(" -> "));
        }
        let (path, deps) = self.modules.get(name).with_context(|| {
            format!("modules.dep names {name} as a dependency but has no entry for it")
        })?;
        stack.push(name.to_owned());
        for dep in deps {
            self.visit(dep, done, stack, order)?;
        }
        stack.pop();
        done.insert(name.to_owned());
        order.push(path.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "\
kernel/drivers/vfio/pci/vfio-pci.ko: kernel/drivers/vfio/pci/vfio-pci-core.ko kernel/virt/lib/irqbypass.ko kernel/drivers/vfio/vfio_virqfd.ko kernel/drivers/vfio/vfio.ko
kernel/drivers/vfio/pci/vfio-pci-core.ko: kernel/virt/lib/irqbypass.ko kernel/drivers/vfio/vfio_virqfd.ko kernel/drivers/vfio/vfio.ko
kernel/drivers/vfio/vfio.ko:
kernel/drivers/vfio/vfio_virqfd.ko:
kernel/virt/lib/irqbypass.ko:
kernel/drivers/vfio/vfio_iommu_type1.ko: kernel/drivers/vfio/vfio.ko
kernel/drivers/net/ethernet/intel/igb/igb.ko.xz: kernel/drivers/dca/dca.ko.xz kernel/drivers/i2c/algos/i2c-algo-bit.ko.xz
kernel/drivers/dca/dca.ko.xz:
kernel/drivers/i2c/algos/i2c-algo-bit.ko.xz:
";
    const BUILTIN: &str = "kernel/drivers/ptp/ptp.ko\nkernel/net/packet/af_packet.ko\n";

    fn want(name: &'static str) -> Want {
        Want {
            name,
            optional: false,
        }
    }

    fn position(order: &[String], needle: &str) -> usize {
        order.iter().position(|p| p.contains(needle)).unwrap()
    }

    #[test]
    fn dependencies_come_first_and_once() {
        let index = ModuleIndex::parse(DEP, BUILTIN);
        let order = index
            .resolve(&[
                want("vfio-pci"),
                want("vfio_iommu_type1"),
                want("igb"),
                want("af_packet"),
            ])
            .unwrap();
        assert_eq!(order.len(), 9, "{order:?}");
        assert!(position(&order, "/vfio.ko") < position(&order, "vfio-pci-core.ko"));
        assert!(position(&order, "irqbypass") < position(&order, "vfio-pci-core.ko"));
        assert!(position(&order, "vfio-pci-core.ko") < position(&order, "vfio-pci.ko"));
        assert!(position(&order, "dca.ko.xz") < position(&order, "igb.ko.xz"));
        assert!(!order.iter().any(|p| p.contains("af_packet")));
    }

    #[test]
    fn missing_modules() {
        let index = ModuleIndex::parse(DEP, BUILTIN);
        assert!(index.resolve(&[want("nonexistent")]).is_err());
        let optional = Want {
            name: "nonexistent",
            optional: true,
        };
        assert!(index.resolve(&[optional]).unwrap().is_empty());
    }

    #[test]
    fn names() {
        assert_eq!(
            module_name("kernel/drivers/vfio/pci/vfio-pci.ko.xz"),
            "vfio_pci"
        );
        assert_eq!(module_name("kernel/fs/9p/9p.ko"), "9p");
    }
}
