//! A persistent thread pool for CPU kernel launches (std only).
//!
//! Workers are started once per process; between jobs each one spins for [`SPIN`] (yielding its
//! core to anything else runnable) before it parks on a condition variable, so a model's
//! back-to-back kernels find it awake (as OpenMP's spinning workers do for PyTorch): waking a
//! parked thread took 5-20 us on a 2-vCPU VM, longer than many of a transformer's kernels. A job is
//! `n` numbered tasks that the caller and the workers take from a shared atomic counter, so
//! faster threads take more tasks (the machine is shared and timings vary). The caller works on
//! its own job and returns only when every task has finished, so a job may borrow data that the
//! caller keeps alive for the duration of [`ThreadPool::run`].
//!
//! The pool is used by one launch at a time; a launch that finds it busy (another thread is
//! launching concurrently, e.g. parallel tests) runs its tasks inline on the calling thread.
//! The number of threads is `CPU_THREADS` from the environment, else the machine's available
//! parallelism (`CPU_THREADS=1`: everything runs on the caller).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// One job: tasks `0..n_tasks`, taken from `next`.
struct Job {
    f: Box<dyn Fn(usize) + Send + Sync>,
    n_tasks: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    panicked: AtomicBool,
    finished: Mutex<bool>,
    finished_cv: Condvar,
}

impl Job {
    /// Takes and runs tasks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n_tasks {
                return;
            }
            if catch_unwind(AssertUnwindSafe(|| (self.f)(i))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.n_tasks {
                let mut fin = self.finished.lock().unwrap_or_else(|e| e.into_inner());
                *fin = true;
                self.finished_cv.notify_all();
            }
        }
    }
}

struct State {
    generation: u64,
    job: Option<Arc<Job>>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// `State::generation`, readable without the lock (what spinning workers watch); written
    /// under the lock.
    generation: AtomicU64,
    /// Workers parked on `wake` (or about to: counted under the lock before waiting).
    parked: AtomicUsize,
}

/// How long an idle worker spins for the next job before parking.
// MiniLM one sentence 3.4 -> 2.7 ms (see docs/performance.md)
pub const SPIN: Duration = Duration::from_micros(200);

/// A pool of parked worker threads that run numbered tasks together with the caller.
pub struct ThreadPool {
    shared: Arc<Shared>,
    /// Held by the launch using the pool (others run inline).
    busy: Mutex<()>,
    threads: usize,
}

impl ThreadPool {
    /// A pool using `threads` threads in all (the caller and `threads - 1` workers).
    pub fn new(threads: usize) -> ThreadPool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                generation: 0,
                job: None,
            }),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            parked: AtomicUsize::new(0),
        });
        for w in 1..threads {
            let for_worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("tinygrad-cpu-{w}"))
                .spawn(move || worker(&for_worker));
            if spawned.is_err() {
                // No more threads: the pool works with fewer (the caller always takes part).
                return ThreadPool {
                    shared,
                    busy: Mutex::new(()),
                    threads: w,
                };
            }
        }
        ThreadPool {
            shared,
            busy: Mutex::new(()),
            threads,
        }
    }

    /// The number of threads that take part in a job (workers plus the caller).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f(0)`, ..., `f(n_tasks - 1)` on the pool's threads and the caller's, and returns
    /// when all have finished. Runs everything inline when there is one task, one thread, or the
    /// pool is busy with another caller's job.
    ///
    /// # Panics
    /// If a task panicked (after all tasks have finished).
    pub fn run(&self, n_tasks: usize, f: Box<dyn Fn(usize) + Send + Sync>) {
        if n_tasks == 0 {
            return;
        }
        let guard = match self.busy.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if n_tasks == 1 || self.threads == 1 || guard.is_none() {
            (0..n_tasks).for_each(f);
            return;
        }
        let job = Arc::new(Job {
            f,
            n_tasks,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            finished: Mutex::new(false),
            finished_cv: Condvar::new(),
        });
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.generation += 1;
            st.job = Some(job.clone());
            self.shared
                .generation
                .store(st.generation, Ordering::Release);
            // A worker parks only after checking the generation under this lock, so one that
            // is not counted yet sees the new generation and does not wait.
            if self.shared.parked.load(Ordering::Acquire) > 0 {
                self.shared.wake.notify_all();
            }
        }
        job.work();
        // Wait for the workers' last tasks: spin briefly (they are usually nearly done), then
        // sleep on the job's condition variable.
        let spin_until = Instant::now() + Duration::from_micros(50);
        while job.done.load(Ordering::Acquire) < n_tasks && Instant::now() < spin_until {
            std::hint::spin_loop();
        }
        if job.done.load(Ordering::Acquire) < n_tasks {
            let mut fin = job.finished.lock().unwrap_or_else(|e| e.into_inner());
            while !*fin {
                fin = job.finished_cv.wait(fin).unwrap_or_else(|e| e.into_inner());
            }
        }
        // Workers that wake up late find no job (or this one with no task left).
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .job = None;
        drop(guard);
        assert!(
            !job.panicked.load(Ordering::Relaxed),
            "thread pool: a task panicked"
        );
    }
}

fn worker(shared: &Shared) {
    let mut seen = 0u64;
    loop {
        // spin (yielding) for the next job before parking
        let spin_until = Instant::now() + SPIN;
        while shared.generation.load(Ordering::Acquire) == seen && Instant::now() < spin_until {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
        let job = {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.generation == seen {
                shared.parked.fetch_add(1, Ordering::AcqRel);
                while st.generation == seen {
                    st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                shared.parked.fetch_sub(1, Ordering::AcqRel);
            }
            seen = st.generation;
            st.job.clone()
        };
        if let Some(job) = job {
            job.work();
        }
    }
}

/// The number of threads CPU kernels use: `CPU_THREADS`, else the available parallelism.
pub fn cpu_threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("CPU_THREADS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// The process-wide pool for CPU kernels, started on first use.
pub fn global_pool() -> &'static ThreadPool {
    static POOL: OnceLock<ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| ThreadPool::new(cpu_threads()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once() {
        let pool = ThreadPool::new(3);
        for n in [0usize, 1, 2, 7, 100] {
            let hits: Arc<Vec<AtomicUsize>> =
                Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
            let h = hits.clone();
            pool.run(
                n,
                Box::new(move |i| {
                    h[i].fetch_add(1, Ordering::Relaxed);
                }),
            );
            assert!(
                hits.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                "n = {n}"
            );
        }
    }

    /// Jobs published while the workers spin (back to back), and after they have parked
    /// (a pause longer than [`SPIN`]): every task of every job runs exactly once, and jobs after
    /// pauses reach every worker (a lost wakeup would leave a worker parked, or hang).
    #[test]
    fn jobs_reach_spinning_and_parked_workers() {
        let pool = ThreadPool::new(3);
        let caller = std::thread::current().id();
        // (not per round: on a loaded machine a woken worker may not be scheduled in time)
        let mut after_pauses = std::collections::HashSet::new();
        for round in 0..40 {
            let after_pause = round % 4 == 3;
            if after_pause {
                std::thread::sleep(SPIN * 3);
            }
            let hits: Arc<Vec<AtomicUsize>> =
                Arc::new((0..64).map(|_| AtomicUsize::new(0)).collect());
            let workers = Arc::new(Mutex::new(std::collections::HashSet::new()));
            let (h, w) = (hits.clone(), workers.clone());
            pool.run(
                64,
                Box::new(move |i| {
                    // long enough for every worker to wake and take some
                    std::thread::sleep(Duration::from_micros(300));
                    h[i].fetch_add(1, Ordering::Relaxed);
                    let me = std::thread::current().id();
                    if me != caller {
                        w.lock().unwrap().insert(me);
                    }
                }),
            );
            assert!(
                hits.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                "round {round}: a task ran other than once"
            );
            if after_pause {
                after_pauses.extend(workers.lock().unwrap().iter().copied());
            }
        }
        assert_eq!(
            after_pauses.len(),
            2,
            "workers that took tasks after a pause: {after_pauses:?}"
        );
    }

    #[test]
    fn concurrent_callers_all_complete() {
        let pool = Arc::new(ThreadPool::new(2));
        let total = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (pool, total) = (pool.clone(), total.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let t = total.clone();
                        pool.run(
                            8,
                            Box::new(move |_| {
                                t.fetch_add(1, Ordering::Relaxed);
                            }),
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("caller thread");
        }
        assert_eq!(total.load(Ordering::Relaxed), 4 * 50 * 8);
    }

    #[test]
    fn a_panicking_task_is_reported_and_the_pool_survives() {
        let pool = ThreadPool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(
                4,
                Box::new(|i| {
                    if i == 2 {
                        panic!("task 2 fails");
                    }
                }),
            )
        }));
        assert!(r.is_err());
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        pool.run(
            5,
            Box::new(move |_| {
                c.fetch_add(1, Ordering::Relaxed);
            }),
        );
        assert_eq!(count.load(Ordering::Relaxed), 5);
    }
}
