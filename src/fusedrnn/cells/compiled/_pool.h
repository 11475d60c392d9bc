/* Threads for the compiled loops: a two-party barrier and one persistent helper thread (included by _kernel.c).
 *
 * Starting a thread per call measured 70-100 µs here (the idle vCPU has to be woken), more than a whole batch-1
 * call of a small layer. So the helper is started once, on a CPU other than the caller's, and kept: after a job
 * it spins (with pause) for POOL_SPIN_NS waiting for the next one, then sleeps on a futex. Back-to-back calls
 * hand work over in ~0.1 µs; the first call after an idle period pays the wake-up once. Waiters never spin
 * longer than a bound and then sleep, so a loaded machine is not made worse by busy threads.
 *
 * pool_run2(fn, a0, a1) runs fn(a1) on the helper and fn(a0) on the caller and returns when both are done; when
 * the helper is in use by another caller, cannot be started, or after fork() in the child, both run on the
 * caller one after the other (so a job must never wait for its partner unless pool_run2 said they run together:
 * it returns 1 in that case and the caller sets up the jobs' barrier for 2 parties before, see pool_try_begin).
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
static void fx_wait(int *addr, int val) { syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
static void fx_wake(int *addr) { syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1 << 30, NULL, NULL, 0); }
#else
static void fx_wait(int *addr, int val) { (void)addr; (void)val; sched_yield(); }
static void fx_wake(int *addr) { (void)addr; }
#endif

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins until *addr != val or spin_ns have passed, then sleeps on the futex (counting itself in *sleepers so the
 * writer knows to wake it) until *addr != val. */
static void wait_change(int *addr, int val, int *sleepers, long spin_ns) {
    long t0 = 0;
    for (int spin = 0;; spin++) {
        if (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != val) return;
        cpu_relax();
        if ((spin & 255) == 255) {
            long t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > spin_ns) break;
        }
    }
    __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(addr, __ATOMIC_SEQ_CST) == val) fx_wait(addr, val);
    __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
}

/* Stores val into *addr and wakes the sleepers on it. */
static void publish(int *addr, int val, int *sleepers) {
    __atomic_store_n(addr, val, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST)) fx_wake(addr);
}

/* ---- a barrier for n <= 2 parties ---------------------------------------------------------------------- */
typedef struct { int count, gen, sleepers; } bar_t;

#define BAR_SPIN_NS 2000000L  /* an idle vCPU wakes slowly (~0.1 ms in a VM): spin up to 2 ms before sleeping */

static void bar_wait(bar_t *b, int n) {
    if (n < 2) return;
    int g = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == n) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        publish(&b->gen, g + 1, &b->sleepers);
        return;
    }
    wait_change(&b->gen, g, &b->sleepers, BAR_SPIN_NS);
}

/* ---- the persistent helper thread ---------------------------------------------------------------------- */
#define POOL_SPIN_NS 1000000L  /* helper and caller spin up to 1 ms for each other before sleeping */

static struct {
    pthread_mutex_t busy;       /* held by the caller whose job the helper runs */
    int started;                /* 1: the helper exists (0 again in a forked child) */
    int job, job_sleepers;      /* generation of the posted job (futex word) */
    int done, done_sleepers;    /* generation of the last finished job (futex word) */
    void (*fn)(void *);
    void *arg;
} pool = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, NULL, NULL};

static void *pool_main(void *unused) {
    (void)unused;
    /* started with no job in flight (done == job) or just before the first is posted: done is the last one */
    int seen = __atomic_load_n(&pool.done, __ATOMIC_ACQUIRE);
    for (;;) {
        wait_change(&pool.job, seen, &pool.job_sleepers, POOL_SPIN_NS);
        seen = __atomic_load_n(&pool.job, __ATOMIC_ACQUIRE);
        pool.fn(pool.arg);
        publish(&pool.done, seen, &pool.done_sleepers);
    }
    return NULL;
}

static void pool_after_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pool.busy = fresh;
    pool.done = pool.job;  /* a job in flight in the parent is not the child's */
    pool.started = 0;  /* the helper did not survive the fork: start a new one when needed */
}

/* Starts the helper on a CPU other than the caller's where the process may use several (a new thread woken next
 * to its parent can share that core for milliseconds), then lets it run anywhere. 1 when it runs. */
#if defined(__linux__)
typedef struct { cpu_set_t all; } pool_start_t;

static void *pool_start_main(void *p) {
    pool_start_t st = *(pool_start_t *)p;
    free(p);
    pthread_setaffinity_np(pthread_self(), sizeof st.all, &st.all);
    return pool_main(NULL);
}
#endif

static int pool_start(void) {
    static int atfork_done = 0;
    if (!atfork_done) atfork_done = pthread_atfork(NULL, NULL, pool_after_fork_child) == 0;
    pthread_t th;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return 0;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int ok = 0;
#if defined(__linux__)
    pool_start_t *st = malloc(sizeof *st);
    int cpu = sched_getcpu();
    if (st && cpu >= 0 && cpu < CPU_SETSIZE && sched_getaffinity(0, sizeof st->all, &st->all) == 0
        && CPU_COUNT(&st->all) > 1 && CPU_ISSET(cpu, &st->all)) {
        cpu_set_t other = st->all;
        CPU_CLR(cpu, &other);
        ok = pthread_attr_setaffinity_np(&attr, sizeof other, &other) == 0
            && pthread_create(&th, &attr, pool_start_main, st) == 0;
    }
    if (!ok) free(st);
#endif
    if (!ok) {
        pthread_attr_destroy(&attr);
        if (pthread_attr_init(&attr) != 0) return 0;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&th, &attr, pool_main, NULL) == 0;
    }
    pthread_attr_destroy(&attr);
    return ok;
}

/* Takes the helper for one pool_run2: 1 when it is ours (then pool_run2 must follow), 0 when the two jobs must
 * run on the caller (helper busy with another caller or not startable). */
static int pool_try_begin(void) {
    if (pthread_mutex_trylock(&pool.busy) != 0) return 0;
    if (!pool.started) pool.started = pool_start();
    if (!pool.started) {
        pthread_mutex_unlock(&pool.busy);
        return 0;
    }
    return 1;
}

/* After pool_try_begin() returned 1: fn(a1) on the helper, fn(a0) here; returns when both are done. */
static void pool_run2(void (*fn)(void *), void *a0, void *a1) {
    pool.fn = fn;
    pool.arg = a1;
    int g = __atomic_load_n(&pool.job, __ATOMIC_RELAXED) + 1;
    publish(&pool.job, g, &pool.job_sleepers);
    fn(a0);
    wait_change(&pool.done, g - 1, &pool.done_sleepers, POOL_SPIN_NS);
    pthread_mutex_unlock(&pool.busy);
}
