//! The counts an EEClass keeps (its instance and static fields): fixed fields that the contract
//! descriptor names on .NET 9 and 10 (`EEClass.NumInstanceFields`, a WORD each), and on .NET 8
//! its "packable" fields — DWORDs after the class's fixed fields, whose size the class says
//! itself (`m_cbFixedEEClassFields`: an EEClass's, an ArrayClass's and a DelegateEEClass's
//! differ), their order the `EEClassPackedFields` type of the layouts' data. Packing them into
//! bit fields was done only when an image was prejitted, which .NET 8 no longer does; a class
//! that says its fields are packed is not read.

use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::runtimes::dotnet::error::DotnetError;

/// A count of an EEClass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// Instance fields, the parents' included.
    InstanceFields,
    /// Static fields the class declares (thread statics included).
    StaticFields,
}

impl Count {
    fn field(self) -> &'static str {
        match self {
            Count::InstanceFields => "NumInstanceFields",
            Count::StaticFields => "NumStaticFields",
        }
    }
}

/// The count `c` of the EEClass at `class`.
pub(crate) fn count(t: &Target, class: u64, c: Count) -> Result<u64> {
    let name = c.field();
    if t.has_field("EEClass", name) {
        return t.field_u16(class, "EEClass", name).map(u64::from);
    }
    let packed = t.read_u8(class.wrapping_add(t.offset("EEClass", "FieldsArePacked")?), "EEClass.m_fFieldsArePacked")?;
    if packed != 0 {
        return Err(DotnetError::Invalid { what: "EEClass", at: class, why: format!("its counts are packed ({packed}): only a prejitted image's were, not read") });
    }
    let at = t.offset("EEClass", "FixedEEClassFieldsSize")?;
    let fixed = u64::from(t.read_u8(class.wrapping_add(at), "EEClass.m_cbFixedEEClassFields")?);
    // The packable fields follow the fixed ones, which reach at least past this byte.
    if fixed <= at {
        return Err(DotnetError::Invalid { what: "EEClass", at: class, why: format!("fixed fields of {fixed} bytes end before their own size's byte ({at})") });
    }
    let offset = t.offset("EEClassPackedFields", name)?;
    t.read_u32(class.wrapping_add(fixed).wrapping_add(offset), "an EEClass's packable field").map(u64::from)
}
