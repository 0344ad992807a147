/* The engine with several sequences and the serving scheduler (engines/core/runtime/sched.h),
 * on stories260K with the kv modules block, token and prealloc:
 *   - greedy ids equal the oracle for one request, and for each request of a batch
 *     they equal that request's ids run alone (batched decode, queueing, preemption);
 *   - prefix sharing: the prefilled positions drop by exactly the positions reused,
 *     and by at least the shared prompt per sharing request;
 *   - waste at every step: token 0, block <= block_size - 1 positions per running
 *     sequence, prealloc = its whole reserve less the positions it holds;
 *   - no block or slot leaked once every request finished;
 *   - admission within the KV budget, the rest queued, never dropped; reserve_output 1
 *     queues instead of preempting;
 *   - EOS ends a request; requests arriving later are waited for, never admitted early;
 *   - engine and scheduler errors name what does not fit.
 * Skips without the shared model files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engines/core/runtime/sched.h"
#include "tests/lib/kv_test.h"

typedef struct fx {
    char model[512], tok[512], oracle[512];
} fx;

static int setup(void **state) {
    static fx f;
    if (!tu_shared("models/stories260K.bin", f.model, sizeof(f.model)) ||
        !tu_shared("models/tok512.bin", f.tok, sizeof(f.tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", f.oracle, sizeof(f.oracle)))
        *state = NULL;
    else
        *state = &f;
    return 0;
}

#define NEED(f) do { if (!(f)) skip(); } while (0)

/* stories260K: 5 layers x 4 KV heads x 8 = 32 floats of K and of V per layer and position */
#define TOKEN_BYTES (2.0 * 5 * 32 * 4)

/* An engine over stories260K with kv module `kv` ("k=v,..." options), max_seqs and a budget. */
static engine *open_engine(const fx *f, const char *kv, const char *opts, int max_seqs, uint64_t budget, int max_pos) {
    bench_opts o = {0};
    void *storage = NULL;
    char err[512];
    if (modreg_parse_opts(opts, &o, &storage, err, sizeof(err))) fail_msg("%s", err);
    engine_spec spec = {.model_path = f->model, .tokenizer_path = f->tok, .kv = kv, .kv_opts = o, .threads = 2,
                        .max_seqs = max_seqs, .kv_budget_bytes = budget, .max_pos = max_pos, .module_dir = tu_module_dir()};
    engine *e = NULL;
    int rc = engine_create(&spec, &e, err, sizeof(err));
    free(storage);
    if (rc) fail_msg("kv %s (%s): %s", kv, opts, err);
    return e;
}

/* ---- requests ---- */

static const char *const texts[] = {
    "The little dog",
    "Once upon a time, there was a girl named Lily. She liked to play in the park with her ball.",
    "Tom and Sue",
    "One day, a big bird flew over the tree and saw a small cat.",
    "The sun was hot",
    "Mom said to Tim, \"Let us go to the shop and buy some apples for the cake.\"",
};
#define N_TEXTS 6

typedef struct reqset {
    int n;
    int ids[16][256];
    sched_req r[16];
} reqset;

/* Request i: texts[i % N_TEXTS] (after `prefix` when given), max_new tokens, seed i. */
static void make_reqs(const engine *e, reqset *rs, int n, int max_new, const char *prefix) {
    char err[256], buf[512];
    assert_true(n <= 16);
    rs->n = n;
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof(buf), "%s%s", prefix ? prefix : "", texts[i % N_TEXTS]);
        int k = tokenizer_encode(engine_tokenizer(e), buf, 1, 0, rs->ids[i], 256, err, sizeof(err));
        if (k < 1) fail_msg("encode: %s", err);
        rs->r[i] = (sched_req){.prompt = rs->ids[i], .n_prompt = k, .max_new = max_new, .seed = (uint64_t)i};
    }
}

typedef struct run_obs {
    const engine *e;
    int bs;                 /* block: its block size; 0: another module */
    int is_token, is_contig;
    double token_bytes;
    int steps, max_running;
    int n_done;
    sched_done done[16];
} run_obs;

/* Every step: waste by the module's rule (engine.h: engine_kv_memory). */
static void on_step(void *user, const sched_step *st) {
    run_obs *o = user;
    o->steps++;
    if (st->running > o->max_running) o->max_running = st->running;
    const engine_kv_mem *m = &st->kv;
    double waste_pos = m->wasted / o->token_bytes;
    if (o->is_token && m->wasted != 0) fail_msg("kv token: step %d wastes %g bytes", st->step, m->wasted);
    if (o->bs && waste_pos > (double)(o->bs - 1) * st->running)
        fail_msg("kv block: step %d wastes %g positions with %d running (block_size %d)", st->step, waste_pos, st->running, o->bs);
    /* a contiguous cache: every position reserved and not live is waste; it caches nothing */
    if (o->is_contig && (m->wasted != m->reserved - m->live || m->cached != 0))
        fail_msg("step %d: wasted %g != reserved %g - live %g (cached %g)", st->step, m->wasted, m->reserved, m->live, m->cached);
}

static void on_done(void *user, const sched_done *d) {
    run_obs *o = user;
    assert_true(o->n_done < 16);
    o->done[o->n_done++] = *d;
}

/* Runs rs on e, whose kv module is kv (block with block size bs), checking the waste
 * at every step; out[i] gets request i's tokens (out_n[i] of them). */
static sched_stats run(engine *e, const char *kv, int bs, const reqset *rs, int max_batch, double reserve, run_obs *obs,
                       int out[][256], int *out_n) {
    char err[512];
    memset(obs, 0, sizeof(*obs));
    obs->e = e;
    obs->bs = !strcmp(kv, "block") ? bs : 0;
    obs->is_token = !strcmp(kv, "token");
    obs->is_contig = !strcmp(kv, "prealloc") || !strcmp(kv, "dynamic");
    obs->token_bytes = (double)engine_kv_token_bytes(e);
    sched_opts o = {.eos = -1, .max_batch = max_batch, .reserve_output = reserve, .on_step = on_step, .on_done = on_done,
                    .user = obs};
    sched *s;
    if (sched_create(e, rs->r, rs->n, &o, &s, err, sizeof(err))) fail_msg("%s", err);
    if (sched_run(s, err, sizeof(err))) fail_msg("%s", err);
    for (int i = 0; i < rs->n; i++) {
        int n;
        const int *ids = sched_output(s, i, &n);
        memcpy(out[i], ids, (size_t)n * sizeof(int));
        out_n[i] = n;
    }
    sched_stats st = *sched_get_stats(s);
    sched_destroy(s);
    assert_int_equal(obs->n_done, rs->n);
    return st;
}

/* ---- tests ---- */

static const char *const kvs[] = {"block", "token", "prealloc"};

static void test_one_request_matches_oracle(void **state) {
    fx *f = *state;
    NEED(f);
    int want[256];
    int n_want = tu_read_ints(f->oracle, want, 256);
    assert_true(n_want > 10);
    for (int k = 0; k < 3; k++) {
        engine *e = open_engine(f, kvs[k], "", 1, 0, 0);
        reqset rs;
        make_reqs(e, &rs, 1, 0, NULL);
        rs.r[0].max_new = n_want - rs.r[0].n_prompt;
        for (int i = 0; i < rs.r[0].n_prompt; i++) assert_int_equal(rs.ids[0][i], want[i]);
        run_obs obs;
        int out[16][256], out_n[16];
        sched_stats st = run(e, kvs[k], 16, &rs, 0, 0, &obs, out, out_n);
        assert_int_equal(out_n[0], rs.r[0].max_new);
        for (int i = 0; i < out_n[0]; i++)
            if (out[0][i] != want[rs.r[0].n_prompt + i])
                fail_msg("kv %s: token %d is %d, the oracle has %d", kvs[k], i, out[0][i], want[rs.r[0].n_prompt + i]);
        assert_int_equal((int)st.decode_tokens, rs.r[0].max_new - 1);
        assert_int_equal(st.peak_running, 1);
        engine_destroy(e);
    }
}

/* Each request run alone, then all together under a budget that holds them all,
 * then under one that queues them (and, for the shared pools, preempts): every
 * request's ids are those it had alone, on every backend. */
static void test_batch_matches_alone(void **state) {
    fx *f = *state;
    NEED(f);
    enum { N = 6, NEW = 40, CTX = 128 };
    static int alone[N][256], got[16][256], got_n[16];
    run_obs obs;
    reqset rs;
    for (int k = 0; k < 3; k++) {
        engine *e1 = open_engine(f, kvs[k], "", 1, 0, CTX);
        make_reqs(e1, &rs, N, NEW, NULL);
        for (int i = 0; i < N; i++) {
            reqset one = {.n = 1};
            memcpy(one.ids[0], rs.ids[i], sizeof(rs.ids[i]));
            one.r[0] = rs.r[i];
            one.r[0].prompt = one.ids[0];
            int o1[16][256], n1[16];
            run(e1, kvs[k], 16, &one, 0, 0, &obs, o1, n1);
            assert_int_equal(n1[0], NEW);
            if (k == 0) {
                memcpy(alone[i], o1[0], sizeof(alone[i]));
            } else {
                /* alone, every backend gives the same ids */
                assert_memory_equal(alone[i], o1[0], (size_t)NEW * sizeof(int));
            }
        }
        engine_destroy(e1);
        double tb = 0;
        /* room for all, for 2 at full context, and (shared pools) for less than the batch needs */
        for (int tight = 0; tight < 3; tight++) {
            if (tight == 2 && !strcmp(kvs[k], "prealloc")) continue;
            engine *probe = open_engine(f, kvs[k], "", 1, 0, CTX);
            tb = (double)engine_kv_token_bytes(probe);
            engine_destroy(probe);
            uint64_t budget = tight == 0 ? (uint64_t)(N * CTX * tb) : tight == 1 ? (uint64_t)(2 * CTX * tb) : (uint64_t)(100 * tb);
            engine *e = open_engine(f, kvs[k], !strcmp(kvs[k], "block") ? "block_size=4" : "", N, budget, CTX);
            sched_stats st = run(e, kvs[k], 4, &rs, 0, 0, &obs, got, got_n);
            for (int i = 0; i < N; i++) {
                assert_int_equal(got_n[i], NEW);
                for (int t = 0; t < NEW; t++)
                    if (got[i][t] != alone[i][t])
                        fail_msg("kv %s, budget %d: request %d token %d is %d, alone %d", kvs[k], tight, i, t, got[i][t], alone[i][t]);
            }
            printf("[ INFO     ] kv %s budget %llu B: peak %d running, %d waited, %d preemptions, %d steps\n", kvs[k],
                   (unsigned long long)budget, st.peak_running, st.waited, st.preemptions, st.steps);
            /* no block or slot leaked, preemptions and recomputation included: nothing is live */
            if (!strcmp(kvs[k], "block")) {
                assert_int_equal((int)kvt_engine_counter(e, "kv.blocks_in_use"), 0);
                assert_true(kvt_engine_counter(e, "kv.blocks_free") + kvt_engine_counter(e, "kv.blocks_cached") ==
                            kvt_engine_counter(e, "kv.blocks_total"));
            } else if (!strcmp(kvs[k], "token")) {
                assert_true(kvt_engine_counter(e, "kv.slots_in_use") == kvt_engine_counter(e, "kv.slots_cached"));
            }
            engine_kv_mem mem = engine_kv_memory(e);
            assert_true(mem.live == 0);
            if (tight == 0) assert_int_equal(st.peak_running, N);
            /* the budget of 2 full contexts: prealloc holds 2; a shared pool more, as it holds positions, not contexts */
            else if (tight == 1 && obs.is_contig) assert_true(st.peak_running == 2 && st.waited == N - 2);
            else if (tight == 1) assert_true(st.peak_running > 2);
            else assert_true(st.peak_running < N && st.waited > 0);
            assert_int_equal(obs.max_running <= st.peak_running, 1);
            engine_destroy(e);
        }
    }
}

/* A shared pool too small for every request's worst case: admitting on the prompt alone
 * preempts; keeping the outputs' room free (reserve_output 1) never does, queues
 * instead, and gives the same ids. */
static void test_reserve_output_avoids_preemption(void **state) {
    fx *f = *state;
    NEED(f);
    enum { N = 6, NEW = 40, CTX = 128 };
    static int a[16][256], a_n[16], b[16][256], b_n[16];
    run_obs obs;
    reqset rs;
    for (int k = 0; k < 2; k++) {
        engine *e = open_engine(f, kvs[k], "", N, (uint64_t)(160 * TOKEN_BYTES), CTX);
        make_reqs(e, &rs, N, NEW, NULL);
        sched_stats s0 = run(e, kvs[k], 16, &rs, 0, 0, &obs, a, a_n);
        sched_stats s1 = run(e, kvs[k], 16, &rs, 0, 1, &obs, b, b_n);
        printf("[ INFO     ] kv %s, 160 positions: reserve_output 0: peak %d, %d preemptions; 1: peak %d, %d preemptions, %d waited\n",
               kvs[k], s0.peak_running, s0.preemptions, s1.peak_running, s1.preemptions, s1.waited);
        assert_true(s0.preemptions > 0);
        assert_int_equal(s1.preemptions, 0);
        assert_true(s1.waited > 0 && s1.peak_running < s0.peak_running);
        for (int i = 0; i < N; i++) {
            assert_int_equal(a_n[i], NEW);
            assert_int_equal(b_n[i], NEW);
            assert_memory_equal(a[i], b[i], NEW * sizeof(int));
        }
        engine_destroy(e);
    }
}

/* A request ends at EOS: here an id the oracle's continuation has, so the request stops
 * at its first occurrence, with it. */
static void test_eos_finishes(void **state) {
    fx *f = *state;
    NEED(f);
    int want[256];
    int n_want = tu_read_ints(f->oracle, want, 256);
    engine *e = open_engine(f, "token", "", 1, 0, 0);
    reqset rs;
    make_reqs(e, &rs, 1, n_want, NULL);
    rs.r[0].max_new = n_want - rs.r[0].n_prompt;
    int eos = want[rs.r[0].n_prompt + 7], first = 7;
    for (int i = 0; i < 7; i++)
        if (want[rs.r[0].n_prompt + i] == eos) { first = i; break; }
    char err[256];
    sched *s;
    sched_opts o = {.eos = eos};
    assert_int_equal(sched_create(e, rs.r, 1, &o, &s, err, sizeof(err)), 0);
    assert_int_equal(sched_run(s, err, sizeof(err)), 0);
    int n;
    const int *out = sched_output(s, 0, &n);
    assert_int_equal(n, first + 1);
    assert_int_equal(out[n - 1], eos);
    sched_destroy(s);
    engine_destroy(e);
}

/* Requests that arrive later: the scheduler waits for them, none is admitted before it
 * arrives, and each still gets the ids it gets alone (the batch changes, the ids do not). */
static void test_staggered_arrivals(void **state) {
    fx *f = *state;
    NEED(f);
    enum { N = 4, NEW = 12 };
    engine *e = open_engine(f, "block", "", N, (uint64_t)(N * 64 * TOKEN_BYTES), 64);
    reqset rs;
    make_reqs(e, &rs, N, NEW, NULL);
    static int a[16][256], a_n[16], b[16][256], b_n[16];
    run_obs obs;
    run(e, "block", 16, &rs, 0, 0, &obs, a, a_n);
    for (int i = 0; i < N; i++) rs.r[i].arrival_ns = (int64_t)i * 20000000;    /* every 20 ms, in order */
    sched_stats st = run(e, "block", 16, &rs, 0, 0, &obs, b, b_n);
    for (int i = 0; i < N; i++) {
        assert_int_equal(b_n[i], NEW);
        assert_memory_equal(a[i], b[i], NEW * sizeof(int));
    }
    /* arrival times are the run's start + the request's offset */
    int64_t start = obs.done[0].arrival_ns - rs.r[obs.done[0].req].arrival_ns;
    assert_true(start == st.t_start_ns);
    for (int k = 0; k < obs.n_done; k++) {
        const sched_done *d = &obs.done[k];
        assert_true(d->arrival_ns - rs.r[d->req].arrival_ns == start);
        assert_true(d->admit_ns >= d->arrival_ns && d->first_ns >= d->admit_ns && d->end_ns >= d->first_ns);
    }
    assert_true(st.t_end_ns - st.t_start_ns >= (int64_t)(N - 1) * 20000000);
    engine_destroy(e);
}

/* The engine with several sequences refuses what it cannot do, with the numbers. */
static void test_engine_errors(void **state) {
    fx *f = *state;
    NEED(f);
    char err[512];
    engine *e = NULL;
    engine_spec spec = {.model_path = f->model, .tokenizer_path = f->tok, .kv = "prealloc", .threads = 1, .max_pos = 64,
                        .kv_budget_bytes = 1000, .module_dir = tu_module_dir()};
    assert_true(engine_create(&spec, &e, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "holds no sequence"));
    assert_non_null(strstr(err, "64 positions"));
    spec.kv_budget_bytes = 0;
    spec.kv_budget_tokens = 64 * 3 + 10;
    assert_int_equal(engine_create(&spec, &e, err, sizeof(err)), 0);
    assert_int_equal(engine_max_seqs(e), 3);        /* 202 positions hold 3 contexts of 64 */
    assert_true(engine_kv_memory(e).reserved == 3 * 64 * (double)engine_kv_token_bytes(e));
    int seqs[] = {0, 0}, toks[] = {1, 1}, pos[] = {0, 0};
    float *logits;
    assert_true(engine_forward_batch(e, seqs, toks, pos, 2, &logits, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "twice"));
    seqs[1] = 3;
    assert_true(engine_forward_batch(e, seqs, toks, pos, 2, &logits, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "outside 0..2"));
    assert_true(engine_reserve(e, 1, 65, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "context"));
    assert_int_equal(engine_share_prefix(e, 0, toks, 2, err, sizeof(err)), 0);     /* prealloc shares nothing */
    /* a request longer than the context, and one that does not fit the budget even alone */
    reqset rs;
    make_reqs(e, &rs, 1, 64, NULL);
    sched *s = NULL;
    sched_opts o = {.eos = -1};
    assert_int_equal(sched_create(e, rs.r, 1, &o, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "exceed the engine's context of 64"));
    engine_destroy(e);

    e = open_engine(f, "block", "block_size=16", 1, (uint64_t)(32 * TOKEN_BYTES), 64);     /* 2 blocks */
    make_reqs(e, &rs, 1, 40, NULL);                  /* prompt + 39 positions > 32: runs, then cannot grow */
    assert_true(rs.r[0].n_prompt < 16);
    assert_int_equal(sched_create(e, rs.r, 1, &o, &s, err, sizeof(err)), 0);
    assert_int_equal(sched_run(s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "does not fit the KV cache even alone"));
    assert_int_equal(sched_get_stats(s)->preemptions, 1);
    sched_destroy(s);
    engine_destroy(e);

    bench_opt pool = {.key = "pool_tokens", .value = "64"};
    spec = (engine_spec){.model_path = f->model, .kv = "block", .kv_opts = {1, &pool}, .threads = 1, .max_pos = 64,
                         .kv_budget_tokens = 128, .module_dir = tu_module_dir()};
    assert_true(engine_create(&spec, &e, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "both size the pool"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_request_matches_oracle),
        cmocka_unit_test(test_batch_matches_alone),
        cmocka_unit_test(test_reserve_output_avoids_preemption),
        cmocka_unit_test(test_eos_finishes),
        cmocka_unit_test(test_staggered_arrivals),
        cmocka_unit_test(test_engine_errors),
    };
    return cmocka_run_group_tests_name("sched", tests, setup, NULL);
}
