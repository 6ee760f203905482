//! The .NET runtime of one process, located once: its module, version, parsed contract
//! descriptor with pointer data, and the two memory views every reader uses (the dump with the
//! runtime's read-only file pages, and the managed images' files for pages the dump left out).
//! The code map, the Frame chains, the thread and monitor reading and the thread names all read
//! through one [`Context`].

use crate::runtimes::dotnet::contract::descriptor::Descriptor;
use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::locate::{self, DescriptorSource, NotLocated, RuntimeVersion};
use crate::runtimes::dotnet::types::metadata::ImageMemory;
use crate::runtimes::dotnet::types::objects::SharedNames;
use crate::runtimes::dotnet::contract::supplement::{self, Applied};
use crate::runtimes::dotnet::contract::target::{RuntimeMemory, Target};
use crate::process::{Locator, Module, Process};

pub(crate) struct Context<'p> {
    pub(crate) process: &'p Process,
    pub(crate) module: &'p Module,
    pub(crate) version: RuntimeVersion,
    pub(crate) descriptor: Descriptor,
    pub(crate) pointer_data: Vec<u64>,
    pub(crate) source: DescriptorSource,
    /// The dump, and the runtime's file for its read-only pages.
    pub(crate) memory: RuntimeMemory<'p>,
    /// Managed images' files, for the pages a dump left out (ReadyToRun code, metadata).
    pub(crate) image: ImageMemory<'p>,
    /// What knot's data added to the descriptor for this build (`supplement.rs`), or why the
    /// supplement this build has could not be applied.
    pub(crate) supplement: Result<Option<Applied>, String>,
    /// The type names its namers made ([`crate::runtimes::dotnet::types::objects::TypeNamer::of`]).
    pub(crate) names: SharedNames,
}

/// Why a process has no [`Context`].
#[derive(Debug)]
pub(crate) enum NoContext {
    /// No `libcoreclr.so` in the process.
    NotDotnet,
    /// A CoreCLR whose descriptor could not be had.
    NotLocated { version: Box<RuntimeVersion>, why: NotLocated },
}

impl<'p> Context<'p> {
    /// Finds the runtime in `process` and reads its descriptor; managed images are looked for
    /// through `locator`.
    pub(crate) fn open(process: &'p Process, locator: &Locator) -> Result<Context<'p>, NoContext> {
        let module = locate::runtime_module(process).ok_or(NoContext::NotDotnet)?;
        let version = RuntimeVersion::of(module);
        let memory = RuntimeMemory { process };
        let (descriptor, pointer_data, source, supplement) = match locate::locate(process, module) {
            Ok(mut located) => {
                crate::trace::step("dotnet: descriptor located");
                let supplement = supplement::apply(&mut located.descriptor, &located.pointer_data, &memory, module, &version).map_err(|e| e.to_string());
                (located.descriptor, located.pointer_data, located.source, supplement)
            }
            // A runtime that exports no descriptor (.NET 8): the whole of it from knot's data.
            Err(NotLocated::NoExport(why)) => match supplement::whole(&memory, module, &version) {
                Ok(Some((descriptor, applied))) => (descriptor, Vec::new(), DescriptorSource::data(), Ok(Some(applied))),
                Ok(None) => return Err(NoContext::NotLocated { version: Box::new(version), why: NotLocated::NoExport(why) }),
                Err(e) => return Err(NoContext::NotLocated { version: Box::new(version), why: NotLocated::Error(e) }),
            },
            Err(why) => return Err(NoContext::NotLocated { version: Box::new(version), why }),
        };
        Ok(Context {
            process,
            module,
            version,
            supplement,
            descriptor,
            pointer_data,
            source,
            memory,
            image: ImageMemory::new(process, locator),
            names: SharedNames::default(),
        })
    }

    /// The contracts as the reader sees them, over the dump's memory.
    pub(crate) fn target(&self) -> Target<'_> {
        Target::borrowed(&self.memory, &self.descriptor, &self.pointer_data)
    }

    /// The contracts over the managed images' memory (ReadyToRun unwind data, metadata).
    pub(crate) fn image_target(&self) -> Target<'_> {
        Target::borrowed(&self.image, &self.descriptor, &self.pointer_data)
    }

    /// Why the managed metadata cannot be read, when this is a single-file app (the runtime is
    /// the app's executable, not `libcoreclr.so`) and CoreLib's image is not in the dump nor in
    /// a file at hand: a single-file app's assemblies are bundled in its executable, whose pages a
    /// heap dump does not hold (a full dump does). `None` otherwise, or when CoreLib is not found
    /// (the runtime had not started: nothing to name).
    pub(crate) fn single_file_metadata_missing(&self) -> Option<DotnetError> {
        if self.module.name() == locate::RUNTIME_MODULE {
            return None;
        }
        let t = self.target();
        let object = t.global_deref("ObjectMethodTable").ok().filter(|&a| a != 0)?;
        let core_lib = t.field_ptr(object, "MethodTable", "Module").ok().filter(|&m| m != 0)?;
        let base = crate::runtimes::dotnet::types::objects::module_base(&t, core_lib).ok().filter(|&b| b != 0)?;
        crate::runtimes::dotnet::types::metadata::metadata_root(&self.image, base).err()
    }

    /// A contract's version, or why knot cannot read it: the contract is named, with the
    /// versions knot implements.
    pub(crate) fn contract(&self, name: &str, known: &[u64]) -> Result<u64, DotnetError> {
        match self.descriptor.contracts.get(name) {
            Some(v) if known.contains(v) => Ok(*v),
            other => Err(DotnetError::Unsupported(format!("{name} contract version {other:?} (knot reads {})", versions(known)))),
        }
    }
}

fn versions(known: &[u64]) -> String {
    let v: Vec<String> = known.iter().map(|v| v.to_string()).collect();
    v.join(" and ")
}

impl NoContext {
    /// The reader's one line for a runtime it cannot read.
    pub(crate) fn why(&self) -> Option<(String, String)> {
        match self {
            NoContext::NotDotnet => None,
            NoContext::NotLocated { version, why: NotLocated::NoExport(why) } => Some((
                version.product.clone(),
                format!("runtime reader unsupported: {version}: {why} (runtimes before .NET 9 have no data contract descriptor)"),
            )),
            NoContext::NotLocated { version, why: NotLocated::Error(e) } => Some((version.product.clone(), format!("runtime reader unsupported: {version}: {e}"))),
        }
    }

    #[cfg(test)]
    /// As a [`DotnetError`], for callers that want one.
    pub(crate) fn into_error(self) -> DotnetError {
        match self {
            NoContext::NotDotnet => DotnetError::NoRuntime,
            NoContext::NotLocated { why: NotLocated::NoExport(why), .. } => DotnetError::Unsupported(why),
            NoContext::NotLocated { why: NotLocated::Error(e), .. } => e,
        }
    }
}
