//! The routes core on simulated time.
