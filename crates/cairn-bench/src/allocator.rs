//! The settings of mimalloc, the allocator the `cairn` and `cairn-bench` binaries declare
//! global; each applies them first thing in its `main`.

// Linked even where nothing else here names it: the settings are mimalloc's functions.
extern crate mimalloc as _;

use std::ffi::{c_int, c_long};

/// How long freed memory stays with the process before mimalloc returns it to the OS.
///
/// With mimalloc's default (one second) the memory of a large GROUP BY went back to the OS
/// between queries, and the next query paid for it again in page faults, the kernel zeroing
/// each 2 MB huge page anew: a fifth of the profile of ten BigFUN Q8-F runs (454 K groups of
/// text keys). Ten seconds removed those faults and most of the system time, and the slow
/// outliers of the large aggregations (bench/results/allocator-purge/). A database keeps the
/// memory its queries just used; ten seconds still returns it once the work stops.
pub const FREED_MEMORY_KEPT_MS: c_long = 10_000;

/// The position of `mi_option_purge_delay` in mimalloc.h's `mi_option_e`, the same in its
/// v2 and v3; libmimalloc-sys exports no constant for it.
const MI_OPTION_PURGE_DELAY: c_int = 15;

unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    fn mi_option_get(option: c_int) -> c_long;
}

/// Keeps freed memory for [`FREED_MEMORY_KEPT_MS`] before returning it to the OS.
pub fn keep_freed_memory() {
    // SAFETY: mimalloc's options are process-wide values it reads atomically; setting one
    // is allowed at any time, from any thread.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, FREED_MEMORY_KEPT_MS) };
    // SAFETY: as above; a read of the same option.
    let kept = unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
    debug_assert_eq!(kept, FREED_MEMORY_KEPT_MS, "mimalloc took the purge delay");
}
