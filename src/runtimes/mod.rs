//! Readers for managed runtimes' own structures in a dump: which managed threads exist, which
//! runtime locks they hold and wait for. Each reader says plainly when it does not know the
//! runtime build it is looking at, and the native reading goes on regardless.

pub mod dotnet;
