//! The type system as the runtime keeps it: objects and their MethodTables, type names as SOS
//! prints them, the loaded modules and their ECMA-335 metadata, methods and their names, static fields.

pub(crate) mod metadata;
pub(crate) mod methoddesc;
pub(crate) mod methodname;
pub(crate) mod modules;
pub(crate) mod objects;
pub(crate) mod statics;
