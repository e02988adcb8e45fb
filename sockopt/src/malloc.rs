//! The C library allocator's settings (glibc only; musl has none to set).

/// Blocks of at least this many bytes get their own mapping from glibc, so
/// that freeing one gives its memory back to the system at once.
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`] (its initial value).
///
/// glibc otherwise raises the threshold to the size of each mapped block
/// freed (up to 32 MiB), so after the first large free, later large blocks
/// come from the heap, and the heap keeps them once freed, behind what is
/// still in use: a bulk load's transient buffers (the VIP file's text, its
/// entries, the first changes) stay resident for good. Setting it fixes
/// both the mmap and the trim threshold (mallopt(3)). Measured with
/// `bench/` (100k VIPs): RSS once loaded 45.5 → 30.2 MiB. A no-op on other
/// C libraries. (mallopt's answer says nothing: glibc answers 1 even for a
/// parameter it does not know, so there is nothing to check.)
pub fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    crate::sys::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
}

/// Every thread allocates from glibc's one main heap.
///
/// glibc otherwise gives a thread that meets a busy heap an arena of its
/// own (up to 8 per core), a 64 MiB reservation of which the pages it used
/// stay resident: the blocking pool's thread, which reads the VIP file,
/// kept one for the daemon's life. holdfast's threads (the runtime's one
/// and the blocking pool's) seldom allocate at once, so the shared heap's
/// lock costs nothing measurable. A no-op on other C libraries (musl has one
/// heap already).
pub fn single_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    crate::sys::mallopt(libc::M_ARENA_MAX, 1);
}
