/* Threads for the compiled loops: a pool of persistent helper threads that *claim* chunks of work (included by
 * _kernel.c).
 *
 * Starting a thread per call measured 70-100 µs here (the idle vCPU has to be woken), more than a whole batch-1
 * call of a small layer. So helpers are started once (each first on a CPU other than the caller's) and kept:
 * after work they spin (with pause) for POOL_SPIN_NS waiting for more, then sleep on a futex.
 *
 * Work is claimed, never assigned. A call (team_begin .. team_end) runs phases (team_run: one step, or one pass
 * of a step); a phase is n chunks numbered 0 .. n-1, and every chunk is run by whichever thread of the call first
 * claims it, the caller included. So a helper that is not running (its core taken by another process) holds up
 * nothing: the caller takes the chunks it left. The phase is posted in one 64-bit ticket
 *
 *     generation (32 bits) | threads - 1 (16 bits) | chunks n (16 bits)
 *
 * and chunk i is claimed by a compare-and-swap of its own flag (a cache line each) from an older generation to
 * the phase's. Thread tid first tries its own chunks (i = tid, tid + threads, ...: the same units or rows every
 * step while nobody is late, so their weights stay in that core's cache), then any chunk left. A helper that
 * wakes after its phase (or its call) ended finds every flag of that phase at its generation or later and touches
 * nothing; one that claims a chunk reads the phase's function and context only then, when the caller is known to
 * be waiting for that chunk. The caller returns from a phase when its own chunks are done and the helpers' count
 * of finished chunks says the rest are; a call returns without waiting for helpers that claimed nothing.
 *
 * Contention: a helper whose core is shared with other processes holds up nothing it has not claimed; the caller
 * waits only for a chunk a helper took and was descheduled in the middle of (spinning briefly, then yielding,
 * which lets a helper on the caller's own core run). Going on with fewer threads does not shorten that wait, and
 * measured it cost: beside two busy processes on two cores an LSTM S2 call took 19-25 ms in 7 of 8 runs when
 * the call went alone after helpers had been slower than the caller in one phase of five, or after one wait of
 * 0.2 ms, against 14-17 ms in 7 of 7 runs without those rules (the helper, idle while the call went alone, slept,
 * and woke on the caller's core). So only a wait of POOL_WAIT_BACKOFF_NS (a helper starved across several
 * scheduler slices: far more runnable threads than cores, or a stopped process) makes the rest of the call run
 * on half the threads, and the calls of the next POOL_BACKOFF_NS start with as many (then every thread is tried
 * again); from three threads or fewer, or when no helper has taken a chunk for POOL_SOLO_NS, on the caller alone
 * (solo), without any synchronisation. Halving, not going alone, is what keeps a 16-thread call from running 16
 * times slower because one of its cores was taken.
 * A helper that finds itself on the caller's CPU moves to another (pool_leave_cpu): there each waits for the
 * other, and the scheduler keeps two busy processes on one core and the caller with its helper on the other
 * (that split is balanced by count). The bad runs above were that (the helper took a fifth of the chunks and
 * slept ten times a call).
 * A call of fewer threads than the pool holds wakes only the helpers it may use (a futex bit set per helper).
 *
 * Results do not depend on which thread ran a chunk, nor on how a step was cut into chunks: every output element
 * is computed the same way in any chunk (scratch memory is per thread id, tid 0 the caller, 1 .. threads - 1 the
 * helpers).
 * A second caller while the pool is taken, a process after fork() (in the child) and a pool that cannot start a
 * thread run on the caller alone.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
/* wait while *addr == val, as waiter bits; wake the waiters among bits (a helper's bit: 1 << tid mod 32) */
static void fx_wait(int *addr, int val, unsigned bits) {
    syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, NULL, NULL, bits);
}
static void fx_wake(int *addr, unsigned bits) {
    syscall(SYS_futex, addr, FUTEX_WAKE_BITSET_PRIVATE, 1 << 30, NULL, NULL, bits);
}
#else
static void fx_wait(int *addr, int val, unsigned bits) { (void)addr; (void)val; (void)bits; sched_yield(); }
static void fx_wake(int *addr, unsigned bits) { (void)addr; (void)bits; }
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

#define POOL_MAX 64                /* threads of one call, the caller included */
#define POOL_CHUNKS 4096           /* most chunks of one phase (a larger phase runs on the caller alone) */
#ifndef POOL_SPIN_NS
#define POOL_SPIN_NS 1000000L      /* an idle helper spins up to 1 ms for the next phase, then sleeps */
#endif
#define POOL_YIELD_NS 20000L       /* a caller waiting for a helper's chunk spins 20 µs, then yields */
#ifndef POOL_SOLO_NS
#define POOL_SOLO_NS 5000000L      /* no chunk taken by a helper for 5 ms: the call goes on alone */
#endif
#ifndef POOL_WAIT_BACKOFF_NS
#define POOL_WAIT_BACKOFF_NS 20000000L  /* one wait of 20 ms for a helper's chunk: half the threads */
#endif
#define POOL_WAKE_NS 200000L       /* a call wakes sleeping helpers at most once per 0.2 ms (a futex call each) */
#ifndef POOL_BACKOFF_NS
#define POOL_BACKOFF_NS 10000000L  /* after a call backed off, calls in the next 10 ms start with its threads */
#endif
#define POOL_GRACE_TICKS 3000      /* the caller leaves a helper's own chunk to it this long (about 1-3 µs) */

#define TK_GEN(v) ((uint32_t)((v) >> 32))
#define TK_PIPES(v) ((int)(((v) >> 31) & 1))
#define TK_NTH(v) ((int)(((v) >> 16) & 0x7fff) + 1)
#define TK_N(v) ((int)((v) & 0xffff))
#define TK_MAKE(g, nth, n) (((uint64_t)(uint32_t)(g) << 32) | ((uint64_t)((nth) - 1) << 16) | (uint64_t)(n))
#define POOL_PIPES 2               /* most pipes of a team_pipes call */
#define POOL_STEAL_NS 20000L       /* a pipe left untouched this long by its own thread is taken over */

typedef void (*chunk_fn)(void *ctx, int chunk, int tid);
typedef void (*pipe_fn)(void *ctx, int pipe, int step, int tid);

/* Counters of the pool's life (relaxed; read by fusedrnn_pool_stats for tests and benchmarks): calls with
 * helpers, phases posted, chunks run by helpers, calls that went on alone, waits for a helper's chunk over
 * POOL_YIELD_NS, phases helpers scanned, helpers' sleeps, calls that started with fewer threads (or alone) within
 * POOL_BACKOFF_NS of one that backed off, calls that went on with half their threads, helpers that moved off the
 * caller's CPU. */
#define PS_COUNT 10
static struct { long v; char pad[56]; } pool_stats[PS_COUNT] __attribute__((aligned(64)));  /* a line each */
enum { PS_CALLS, PS_PHASES, PS_HELPER_CHUNKS, PS_SOLO, PS_LONG_WAITS, PS_SCANS, PS_SLEEPS, PS_BACKOFFS, PS_HALVED,
       PS_MOVED };
static inline void ps_add(int i, long v) { __atomic_add_fetch(&pool_stats[i].v, v, __ATOMIC_RELAXED); }

/* Copies the first n (<= PS_COUNT) counters into out; returns how many there are. */
int fusedrnn_pool_stats(long *out, int n) {
    for (int i = 0; i < n && i < PS_COUNT; i++) out[i] = __atomic_load_n(&pool_stats[i].v, __ATOMIC_RELAXED);
    return PS_COUNT;
}

/* The pool's state; what one side writes and the other reads often sits in a cache line of its own. */
static struct {
    pthread_mutex_t busy;     /* held by the caller whose call the pool runs */
    int started;              /* helpers running (0 again in a forked child) */
    uint32_t gen;             /* generation of the last phase (caller's copy) */
    long backoff_until;       /* calls begun before this time use at most backoff_nth threads (contention) */
    int backoff_nth;
    uint64_t ticket __attribute__((aligned(64)));  /* see above; closed (n = 0) between phases of no call */
    chunk_fn fn __attribute__((aligned(64)));      /* the posted phase (written only when it changes) */
    int caller_cpu;                                /* the CPU the caller last posted a phase from (-1: unknown) */
    void *ctx;
    pipe_fn pfn;
    int pipe_steps;
    unsigned done __attribute__((aligned(64)));    /* chunks finished by helpers, ever (wraps) */
    int wake __attribute__((aligned(64)));         /* futex word: bumped to wake sleeping helpers */
    uint64_t sleeping;                             /* bit tid: helper tid is (about to be) asleep */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .caller_cpu = -1};

/* pipe k of a team_pipes call: generation (32 bits) | next step (30 bits) | done | busy (a cache line each) */
static struct { uint64_t w; char pad[56]; } pool_pipes[POOL_PIPES] __attribute__((aligned(64)));
#define PW_STEP(w) ((int)(((w) >> 2) & 0x3fffffff))
#define PW_MAKE(g, step, done) (((uint64_t)(uint32_t)(g) << 32) | ((uint64_t)(step) << 2) | ((uint64_t)(done) << 1))

/* Runs steps of the pipes of the posted team_pipes call for thread tid: the next step of its own pipe (tid mod
 * pipes) whenever it is free, of another pipe when that one has stood free and unchanged for POOL_STEAL_NS (its
 * thread is late). A helper returns when every pipe is done, the call has moved on, or it could not run a step for
 * POOL_SPIN_NS; the caller (leader) only when every pipe is done. Returns the steps it ran. */
static int pool_pipe_work(int tid, uint64_t v, int leader) {
    const uint32_t g = TK_GEN(v);
    const int np = TK_N(v), home = tid % np;
    uint64_t last[POOL_PIPES] = {0};
    long since[POOL_PIPES] = {0};
    int ran = 0;
    long idle0 = 0;
    for (int spin = 0;; spin++) {
        int all_done = 1, progressed = 0;
        for (int j = 0; j < np; j++) {
            const int k = (home + j) % np;
            uint64_t w = __atomic_load_n(&pool_pipes[k].w, __ATOMIC_ACQUIRE);
            if ((uint32_t)(w >> 32) != g) return ran;  /* the call is over (a late helper) */
            if (w & 2) continue;
            all_done = 0;
            if (w & 1) continue;
            if (k != home) {  /* another thread's pipe: only when it stood free and unchanged long enough */
                const long tn = now_ns();
                if (w != last[k]) { last[k] = w; since[k] = tn; continue; }
                if (tn - since[k] < POOL_STEAL_NS) continue;
            }
            if (!__atomic_compare_exchange_n(&pool_pipes[k].w, &w, w | 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                continue;
            const int step = PW_STEP(w), nsteps = pool.pipe_steps;
            pool.pfn(pool.ctx, k, step, tid);
            const uint64_t w1 = PW_MAKE(g, step + 1, step + 1 >= nsteps);
            __atomic_store_n(&pool_pipes[k].w, w1, __ATOMIC_RELEASE);
            last[k] = w1;  /* a pipe taken over stays taken (since[k] is kept) until its own thread moves it on */
            ran++;
            progressed = 1;
            if (tid) ps_add(PS_HELPER_CHUNKS, 1);
            break;  /* own pipe first again */
        }
        if (all_done) return ran;
        if (progressed) { idle0 = 0; spin = 0; continue; }
        cpu_relax();
        if ((spin & 63) == 63) {
            const long tn = now_ns();
            if (!idle0) idle0 = tn;
            else if (!leader && tn - idle0 > POOL_SPIN_NS) return ran;
            else if (tn - idle0 > 50 * POOL_YIELD_NS) {  /* the other thread runs a long step */
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            } else if (tn - idle0 > POOL_YIELD_NS) sched_yield();
        }
    }
}


/* claim flag of chunk i: the generation of the phase that last claimed it (one cache line each) */
static struct { uint32_t gen; char pad[60]; } pool_claims[POOL_CHUNKS] __attribute__((aligned(64)));

/* Starts the next generation (the caller, no phase outstanding). Flags are compared modulo 2^32, so every 2^30
 * phases all of them are brought up to just below the new generation: a flag left untouched for 2^31 phases would
 * otherwise look newer than the phase and its chunk would never be claimed. */
static void pool_next_gen(void) {
    pool.gen++;
    if ((pool.gen & 0x3fffffff) == 0)
        for (int i = 0; i < POOL_CHUNKS; i++) __atomic_store_n(&pool_claims[i].gen, pool.gen - 1, __ATOMIC_RELAXED);
}

/* 1 when chunk i of the phase of generation g is still unclaimed (flags only grow, modulo 2^32). */
static inline int chunk_open(int i, uint32_t g) {
    return (int32_t)(__atomic_load_n(&pool_claims[i].gen, __ATOMIC_RELAXED) - g) < 0;
}

/* 1 when the posted phase has a chunk thread tid could claim. */
static int pool_has_work(int tid) {
    const uint64_t v = __atomic_load_n(&pool.ticket, __ATOMIC_SEQ_CST);
    if (tid >= TK_NTH(v)) return 0;
    if (TK_PIPES(v)) {
        for (int k = 0; k < TK_N(v); k++) {
            const uint64_t w = __atomic_load_n(&pool_pipes[k].w, __ATOMIC_SEQ_CST);
            if ((uint32_t)(w >> 32) == TK_GEN(v) && !(w & 2)) return 1;
        }
        return 0;
    }
    for (int i = 0; i < TK_N(v); i++)
        if (chunk_open(i, TK_GEN(v))) return 1;
    return 0;
}

static inline uint64_t ticks(void);

/* Claims and runs chunks of the posted phase, its own (i = tid mod threads) first, while any is left for thread
 * tid; returns how many it ran. grace > 0 (the caller, while its helpers keep up): before taking another
 * thread's chunk, give that thread up to grace ticks from the end of its own chunks to claim it (so a helper a
 * fraction of a microsecond late keeps its chunk and its cache, as with a barrier, but never longer). */
static int pool_claim_all_(int tid, uint64_t grace) {
    const uint64_t v = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
    const uint32_t g = TK_GEN(v);
    const int n = TK_N(v), nth = TK_NTH(v);
    if (tid >= nth) return 0;
    if (TK_PIPES(v)) return n ? pool_pipe_work(tid, v, 0) : 0;
    int mine = 0;
    uint64_t deadline = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = pass ? 0 : tid; i < n; i += pass ? 1 : nth) {
            if (pass && i % nth == tid) continue;
            if (pass && grace) {  /* another thread's chunk: let it come first for a moment */
                if (!deadline) deadline = ticks() + grace;
                while (chunk_open(i, g) && ticks() < deadline) cpu_relax();
            }
            uint32_t f = __atomic_load_n(&pool_claims[i].gen, __ATOMIC_RELAXED);
            if ((int32_t)(f - g) >= 0) continue;
            if (!__atomic_compare_exchange_n(&pool_claims[i].gen, &f, g, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                continue;
            pool.fn(pool.ctx, i, tid);
            mine++;
            if (tid) {
                ps_add(PS_HELPER_CHUNKS, 1);
                __atomic_add_fetch(&pool.done, 1, __ATOMIC_RELEASE);
            }
        }
    return mine;
}

static int pool_claim_all(int tid) { return pool_claim_all_(tid, 0); }

#if defined(__linux__)
/* A helper's CPU move in progress: its own affinity set, to be restored (a failed restore is retried). */
typedef struct { cpu_set_t own; int narrowed; long last; } pool_move_t;

/* Moves the calling thread off CPU cc (its own affinity set without cc, then its own set again: the thread stays
 * where it was moved until the scheduler moves it); 1 when it moved. The set, read each time, keeps any narrowing
 * made since the thread started (taskset, a forked child pinning itself). A failed restore is left in m. */
static int move_off_cpu(int cc, pool_move_t *m) {
    if (pthread_getaffinity_np(pthread_self(), sizeof m->own, &m->own) != 0 || !CPU_ISSET(cc, &m->own)
        || CPU_COUNT(&m->own) < 2)
        return 0;
    cpu_set_t other = m->own;
    CPU_CLR(cc, &other);
    if (pthread_setaffinity_np(pthread_self(), sizeof other, &other) != 0) return 0;
    if (pthread_setaffinity_np(pthread_self(), sizeof m->own, &m->own) != 0) m->narrowed = 1;
    ps_add(PS_MOVED, 1);
    return 1;
}

/* Moves the calling helper off the caller's CPU when it runs there (at most once per POOL_SPIN_NS: the caller may
 * have moved since it posted the phase). */
static void pool_leave_cpu(pool_move_t *m) {
    if (m->narrowed) {  /* the last restore failed: try again */
        if (pthread_setaffinity_np(pthread_self(), sizeof m->own, &m->own) == 0) m->narrowed = 0;
        return;
    }
    const int cc = __atomic_load_n(&pool.caller_cpu, __ATOMIC_RELAXED);
    if (cc < 0 || cc >= CPU_SETSIZE || sched_getcpu() != cc) return;
    const long tn = now_ns();
    if (tn - m->last < POOL_SPIN_NS) return;
    m->last = tn;
    move_off_cpu(cc, m);
}

/* The same for threads outside the pool: the SDK targets' row and direction splits run their blocks on Python
 * threads, woken by a caller on CPU cc (fusedrnn_thread_cpu). Woken threads tend to start on their waker's CPU,
 * where the two then take turns: a batch-1 Quark call's two directions took 2.2 ms instead of 1.3 ms. */
int fusedrnn_thread_cpu(void) { return sched_getcpu(); }

int fusedrnn_leave_cpu(int cc) {
    if (cc < 0 || cc >= CPU_SETSIZE || sched_getcpu() != cc) return 0;
    pool_move_t m = {.narrowed = 0, .last = 0};
    const int moved = move_off_cpu(cc, &m);
    if (m.narrowed) (void)pthread_setaffinity_np(pthread_self(), sizeof m.own, &m.own);  /* once more */
    return moved;
}

static void pool_note_caller_cpu(void) {
    const int cpu = sched_getcpu();
    if (pool.caller_cpu != cpu) __atomic_store_n(&pool.caller_cpu, cpu, __ATOMIC_RELAXED);
}
#else
typedef struct { int unused; } pool_move_t;
static void pool_leave_cpu(pool_move_t *m) { (void)m; }
static void pool_note_caller_cpu(void) {}
int fusedrnn_thread_cpu(void) { return -1; }
int fusedrnn_leave_cpu(int cc) { (void)cc; return 0; }
#endif

static void *pool_main(void *p) {
    const int tid = (int)(intptr_t)p;
    uint64_t seen = 0;  /* the last phase this helper scanned: nothing new appears in it (chunks only get taken) */
    pool_move_t move;   /* this helper's moves off the caller's CPU */
    memset(&move, 0, sizeof move);
    for (;;) {
        int w = __atomic_load_n(&pool.wake, __ATOMIC_ACQUIRE);
        long t0 = 0;
        for (int spin = 0;; spin++) {
            const uint64_t v = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
            if (v != seen) {  /* a new phase (or the end of one's call): keep spinning for the next while work comes */
                seen = v;
                if (tid >= TK_NTH(v) && TK_N(v)) break;  /* a call with fewer threads: sleep, do not spin */
                ps_add(PS_SCANS, 1);
                pool_leave_cpu(&move);
                pool_claim_all(tid);
                t0 = 0;
                spin = 0;
                continue;
            }
            cpu_relax();
            if ((spin & 255) == 255) {
                long t = now_ns();
                if (!t0) t0 = t;
                else if (t - t0 > POOL_SPIN_NS) break;
            }
        }
        __atomic_or_fetch(&pool.sleeping, 1ULL << tid, __ATOMIC_SEQ_CST);
        ps_add(PS_SLEEPS, 1);
        /* a phase posted before we counted ourselves is seen here (seq_cst on both sides) */
        if (!pool_has_work(tid) && __atomic_load_n(&pool.wake, __ATOMIC_SEQ_CST) == w)
            fx_wait(&pool.wake, w, 1u << (tid & 31));
        __atomic_and_fetch(&pool.sleeping, ~(1ULL << tid), __ATOMIC_SEQ_CST);
        seen = 0;
    }
    return NULL;
}

static void pool_after_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pool.busy = fresh;
    pool.ticket = TK_MAKE(pool.gen + 1, 1, 0);  /* a phase in flight in the parent is not the child's */
    pool.gen++;
    pool.sleeping = 0;
    pool.caller_cpu = -1;
    pool.started = 0;  /* the helpers did not survive the fork: start new ones when needed */
}

/* Starts helper tid on a CPU other than the caller's where the process may use several (a new thread woken next
 * to its parent can share that core for milliseconds), then lets it run anywhere. 1 when it runs. */
#if defined(__linux__)
typedef struct { cpu_set_t all; int tid; } pool_start_t;

static void *pool_start_main(void *p) {
    pool_start_t st = *(pool_start_t *)p;
    free(p);
    pthread_setaffinity_np(pthread_self(), sizeof st.all, &st.all);
    return pool_main((void *)(intptr_t)st.tid);
}
#endif

static int pool_start(int tid) {
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
        st->tid = tid;
        ok = pthread_attr_setaffinity_np(&attr, sizeof other, &other) == 0
            && pthread_create(&th, &attr, pool_start_main, st) == 0;
    }
    if (!ok) free(st);
#endif
    if (!ok) {
        pthread_attr_destroy(&attr);
        if (pthread_attr_init(&attr) != 0) return 0;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&th, &attr, pool_main, (void *)(intptr_t)tid) == 0;
    }
    pthread_attr_destroy(&attr);
    return ok;
}

/* A cheap clock for comparing durations within one call (the TSC on x86, else CLOCK_MONOTONIC). */
static inline uint64_t ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return (uint64_t)now_ns();
#endif
}

/* One call's use of the pool (on the caller's stack). */
typedef struct {
    int nth;         /* threads of the call, the caller included (1: the caller alone, no pool held) */
    int solo;        /* 1 once contention made the call go on alone */
    int alone;       /* consecutive phases the caller ran every chunk of */
    long woke;       /* when the caller last woke sleeping helpers */
    long alone_since;  /* when the current run of phases without help began */
} team_t;

/* Begins a call that may use up to `want` threads: t->nth is what it got (1 when the pool is taken by another
 * caller or no helper can be started). team_end must follow. */
static void team_begin(team_t *t, int want) {
    t->nth = 1;
    t->solo = t->alone = 0;
    t->woke = t->alone_since = 0;
    if (want > POOL_MAX) want = POOL_MAX;
    if (want < 2 || pthread_mutex_trylock(&pool.busy) != 0) return;
    if (now_ns() < pool.backoff_until && want > pool.backoff_nth) {  /* helpers were late moments ago */
        ps_add(PS_BACKOFFS, 1);
        want = pool.backoff_nth;
        if (want < 2) {
            pthread_mutex_unlock(&pool.busy);
            return;
        }
    }
    while (pool.started < want - 1 && pool_start(pool.started + 1)) pool.started++;
    if (pool.started == 0) {
        pthread_mutex_unlock(&pool.busy);
        return;
    }
    t->nth = pool.started + 1 < want ? pool.started + 1 : want;
    ps_add(PS_CALLS, 1);
}

static void team_go_solo(team_t *t) {
    ps_add(PS_SOLO, 1);
    pool.backoff_until = now_ns() + POOL_BACKOFF_NS;
    pool.backoff_nth = 1;
    t->solo = 1;  /* helpers late, slow or descheduled: the rest of the call on this thread */
    __atomic_store_n(&pool.ticket, TK_MAKE(pool.gen, 1, 0), __ATOMIC_RELEASE);
}

/* Contention (between phases, no chunk outstanding): the rest of the call on half the threads, the caller alone
 * from three or fewer; the calls of the next POOL_BACKOFF_NS start with as many. */
static void team_back_off(team_t *t) {
    if (t->nth <= 3) { team_go_solo(t); return; }
    ps_add(PS_HALVED, 1);
    t->nth /= 2;
    t->alone = 0;
    pool.backoff_until = now_ns() + POOL_BACKOFF_NS;
    pool.backoff_nth = t->nth;
}

/* Wakes the sleeping helpers of a call of nth threads, tids 1 .. nth - 1 (at most once per POOL_WAKE_NS when
 * rate-limited); 1 when one of them was asleep. The futex wakes the waiters whose bit (tid mod 32) is set. */
static int team_wake(team_t *t, int rate_limited) {
    const uint64_t m = (t->nth >= 64 ? ~0ULL : (1ULL << t->nth) - 1) & ~1ULL;
    if (!(__atomic_load_n(&pool.sleeping, __ATOMIC_SEQ_CST) & m)) return 0;
    const long tn = now_ns();
    if (!rate_limited || tn - t->woke > POOL_WAKE_NS) {
        t->woke = tn;
        __atomic_add_fetch(&pool.wake, 1, __ATOMIC_SEQ_CST);
        fx_wake(&pool.wake, (unsigned)m | (unsigned)(m >> 32));
    }
    return 1;
}

/* The phase fn(ctx, i, tid) for the chunks i < n, each run once by some thread of the call; returns when all
 * are done (their writes visible here).
 *
 * Contention (see the top of this file): after one wait over POOL_WAIT_BACKOFF_NS the call goes on with half its
 * threads; when for 64 phases and POOL_SOLO_NS no helper took a chunk, alone. */
static void team_run(team_t *t, chunk_fn fn, void *ctx, int n) {
    if (t->nth < 2 || t->solo || n < 2 || n > POOL_CHUNKS) {
        for (int i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    ps_add(PS_PHASES, 1);
    if (pool.fn != fn) pool.fn = fn;  /* unchanged: the helpers' copy of the line stays valid */
    if (pool.ctx != ctx) pool.ctx = ctx;
    const unsigned d0 = __atomic_load_n(&pool.done, __ATOMIC_RELAXED);  /* no helper holds a chunk now */
    pool_next_gen();
    pool_note_caller_cpu();
    __atomic_store_n(&pool.ticket, TK_MAKE(pool.gen, t->nth, n), __ATOMIC_SEQ_CST);
    /* a helper asleep when the phase began: its late start is the wake-up, not contention (woken at most once
     * per POOL_WAKE_NS, not every phase) */
    const int waking = team_wake(t, 1);
    /* a grace for late helpers only while they kept up in the last phase: an absent helper costs nothing */
    const int mine = pool_claim_all_(0, t->alone ? 0 : POOL_GRACE_TICKS);
    if (__atomic_load_n(&pool.done, __ATOMIC_ACQUIRE) - d0 != (unsigned)(n - mine)) {
        long t0 = 0;
        for (int spin = 0; __atomic_load_n(&pool.done, __ATOMIC_ACQUIRE) - d0 != (unsigned)(n - mine); spin++) {
            cpu_relax();
            if ((spin & 63) == 63) {
                long tn = now_ns();
                if (!t0) t0 = tn;
                else if (tn - t0 > 50 * POOL_YIELD_NS) {  /* a long chunk (a whole direction): sleep a little */
                    struct timespec ts = {0, 20000};
                    nanosleep(&ts, NULL);
                } else if (tn - t0 > POOL_YIELD_NS) sched_yield();
            }
        }
        if (t0) {
            long waited = now_ns() - t0;
            if (waited > POOL_YIELD_NS) ps_add(PS_LONG_WAITS, 1);
            if (!waking && waited > POOL_WAIT_BACKOFF_NS) { team_back_off(t); return; }
        }
    }
    if (mine < n) {
        t->alone = 0;
    } else if (++t->alone == 1) {
        t->alone_since = now_ns();
    } else if (t->alone % 64 == 0 && now_ns() - t->alone_since > POOL_SOLO_NS) {
        team_go_solo(t);
    }
}

/* Pipes: fn(ctx, k, step, tid) for step 0 .. nsteps-1 of every pipe k < npipes, the steps of a pipe in order
 * and one at a time, different pipes independent (a bidirectional call's directions). Each thread keeps to its
 * own pipe while the other threads keep up (no synchronisation per step); a late thread's pipe is taken over
 * step by step (pool_pipe_work). Returns when every step has run. */
static void team_pipes(team_t *t, pipe_fn fn, void *ctx, int npipes, int nsteps) {
    if (t->nth < 2 || t->solo || npipes < 2 || npipes > POOL_PIPES || nsteps <= 0) {
        for (int k = 0; k < npipes; k++)
            for (int i = 0; i < nsteps; i++) fn(ctx, k, i, 0);
        return;
    }
    ps_add(PS_PHASES, 1);
    pool_next_gen();
    pool.pfn = fn;
    pool.ctx = ctx;
    pool.pipe_steps = nsteps;
    for (int k = 0; k < npipes; k++) __atomic_store_n(&pool_pipes[k].w, PW_MAKE(pool.gen, 0, 0), __ATOMIC_RELAXED);
    pool_note_caller_cpu();
    const uint64_t v = TK_MAKE(pool.gen, t->nth, npipes) | (1ULL << 31);
    __atomic_store_n(&pool.ticket, v, __ATOMIC_SEQ_CST);
    team_wake(t, 0);
    pool_pipe_work(0, v, 1);
}

/* Ends the call: the ticket closed (no chunk left), the pool free for the next caller. Helpers that took no
 * chunk are not waited for (they cannot take one any more). */
static void team_end(team_t *t) {
    if (t->nth < 2) return;
    __atomic_store_n(&pool.ticket, TK_MAKE(pool.gen, 1, 0), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pool.busy);
}
