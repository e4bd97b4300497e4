//! The extension's allocator: sweeps allocate many small buffers (commands out,
//! replies in), and mimalloc keeps that off the system allocator's slow paths.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
