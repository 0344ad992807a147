/* bench plot and report.html on a real run of stories260K: bench run draws the
 * figures at its end (PNG and SVG of each kind the results have data for), the
 * report renders in headless Chromium with every figure decoded and the run's
 * numbers in its table, a run without gnuplot still gets its report, and a
 * real allocator run gets its figure. Skips the gnuplot and
 * Chromium parts, with a message, where they are not installed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/report/plot.h"
#include "harness/report/rmodel.h"
#include "harness/report/results.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

typedef struct fx {
    char tmp[512];
    char run[700];
    int ran;
} fx;

static fx *g;

static int setup(void **state) {
    (void)state;
    char model[512], sc[700];
    g = calloc(1, sizeof(*g));
    if (!g) return -1;
    if (!tu_shared("models/stories260K.bin", model, sizeof(model)) || !tu_tmpdir(g->tmp, sizeof(g->tmp))) return 0;
    snprintf(sc, sizeof(sc), "%s/plot.json", g->tmp);
    snprintf(g->run, sizeof(g->run), "%s/run", g->tmp);
    FILE *o = fopen(sc, "w");
    if (!o) return -1;
    fprintf(o,
            "{\"name\": \"plot\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 24, \"seed\": 1},"
            " \"cache\": \"warm\", \"repetitions\": 2, \"warmup\": 0, \"threads\": 1, \"sample_ms\": 1,"
            " \"matrix\": {\"kv\": [\"prealloc\", {\"name\": \"dynamic\", \"options\": {\"step\": 8}}],"
            " \"fixed\": {\"loader\": \"mmap\"}}}",
            model);
    fclose(o);
    unsetenv("BENCH_GNUPLOT");
    if (tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, g->run)) return -1;
    g->ran = 1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g && g->tmp[0]) tu_rmtree(g->tmp);
    free(g);
    return 0;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

static int text_has(const char *path, const char *needle);

/* sh -c cmd with its stderr on a pseudo-terminal (so bench sees a terminal and draws its
 * progress line), everything the terminal received written to err_path. Returns the
 * command's exit status, or -1. */
static int system_pty(const char *cmd, const char *err_path) {
    int m, s;
    if (openpty(&m, &s, NULL, NULL, NULL)) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(m);
        close(s);
        return -1;
    }
    if (!pid) {
        close(m);
        setsid();
        dup2(s, 2);
        close(s);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(s);
    FILE *o = fopen(err_path, "w");
    char buf[4096];
    ssize_t n;
    /* read until the last writer closes the terminal (EIO), so a full terminal never stops bench */
    while ((n = read(m, buf, sizeof(buf))) > 0)
        if (o) fwrite(buf, 1, (size_t)n, o);
    close(m);
    int st, ok = o && !fclose(o);
    if (waitpid(pid, &st, 0) != pid || !ok) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path) {
    char err[256];
    return rr_slurp(path, NULL, err, sizeof(err));
}

static void test_figures_written_by_run(void **state) {
    (void)state;
    if (!g->ran) skip();
    if (!pl_gnuplot_found(NULL)) {
        fprintf(stderr, "test_plot: gnuplot not installed (scripts/deps.sh installs gnuplot-nox); skipped\n");
        skip();
    }
    static const char *const want[] = {"rss_timeline", "latency", "itl", "faults", "kv"};
    for (int i = 0; i < 5; i++) {
        char png[900], svg[900], gp[900];
        snprintf(png, sizeof(png), "%s/plots/%s.png", g->run, want[i]);
        snprintf(svg, sizeof(svg), "%s/plots/%s.svg", g->run, want[i]);
        snprintf(gp, sizeof(gp), "%s/plots/%s.gp", g->run, want[i]);
        assert_true(file_size(png) > 1000);
        assert_true(file_size(gp) > 100);
        char *p = slurp(png), *s = slurp(svg);
        assert_non_null(p);
        assert_non_null(s);
        assert_memory_equal(p, "\x89PNG", 4);
        assert_non_null(strstr(s, "<svg"));
        free(p);
        /* titles and axis units are in the figure, not only in the report */
        if (!strcmp(want[i], "latency")) assert_non_null(strstr(s, "TTFT (ms)"));
        if (!strcmp(want[i], "rss_timeline")) {
            assert_non_null(strstr(s, "MiB"));
            assert_non_null(strstr(s, "first token"));   /* a phase mark */
            assert_non_null(strstr(s, "kv (at phase ends)"));
        }
        if (!strcmp(want[i], "kv")) assert_non_null(strstr(s, "tokens in the cache"));
        free(s);
        char *script = slurp(gp);
        assert_non_null(script);
        /* the legends name only the regions a variant has: every variant here maps the file */
        if (!strcmp(want[i], "rss_timeline")) {
            /* "last token" left of its line, where the end-of-run markers are not */
            const char *lt = strstr(script, "set label \"last token\"");
            assert_non_null(lt);
            const char *eol = strchr(lt, '\n');
            assert_non_null(eol);
            char *line = strndup(lt, (size_t)(eol - lt));
            assert_non_null(strstr(line, " right offset -"));
            free(line);
            assert_non_null(strstr(script, "model_file (at phase ends)"));
            assert_null(strstr(script, "weights (at phase ends)"));
        }
        /* the subtitle names only the curves that are drawn: the worker's samples give
         * reserved and live, not resident and wasted */
        if (!strcmp(want[i], "kv")) assert_null(strstr(script, "resident: its RSS"));
        /* major faults are named for what they are, not "read from disk" (pread reads without
         * faulting); an all-zero panel says "none" */
        if (!strcmp(want[i], "faults")) {
            assert_non_null(strstr(script, "waited for I/O"));
            assert_null(strstr(script, "major faults (read from disk)"));
            /* what each variant read from disk stands beside its major faults */
            assert_non_null(strstr(script, "(read from disk: "));
            rr_doc d;
            char err[256];
            assert_int_equal(rr_load(g->run, &d, err, sizeof(err)), 0);
            double maj = 0;
            static const char *const ph[] = {"majflt_load", "majflt_prefill", "majflt_decode"};
            for (int v = 0; v < d.n; v++)
                for (int k = 0; k < 3; k++) {
                    double x = rr_summary_num(&d.v[v], ph[k], "median");
                    if (isfinite(x)) maj += x;
                }
            rr_free(&d);
            assert_int_equal(strstr(script, "none: no major fault") != NULL, maj == 0);
        }
        free(script);
    }
    /* no ns/op metrics in an inference run: no allocator figure, and no error either */
    char alloc[900];
    snprintf(alloc, sizeof(alloc), "%s/plots/alloc.png", g->run);
    assert_int_equal(file_size(alloc), -1);
}

static void test_report_renders_in_chromium(void **state) {
    (void)state;
    if (!g->ran) skip();
    const char *const names[] = {"chromium", "chromium-browser", NULL};
    const char *browser = NULL;
    for (int i = 0; names[i] && !browser; i++) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", names[i]);
        if (system(cmd) == 0) browser = names[i];
    }
    if (!browser) {
        fprintf(stderr, "test_plot: chromium not installed (scripts/deps.sh installs it); report rendering skipped\n");
        skip();
    }
    char report[900], dom[900], cmd[3000];
    snprintf(report, sizeof(report), "%s/report.html", g->run);
    snprintf(dom, sizeof(dom), "%s/dom.html", g->tmp);
    assert_true(file_size(report) > 0);
    char *abs = realpath(report, NULL);
    assert_non_null(abs);
    snprintf(cmd, sizeof(cmd),
             "HOME='%s' timeout 120 %s --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking"
             " --disable-component-update --disable-sync --user-data-dir='%s/chromium' --dump-dom 'file://%s' >'%s' 2>/dev/null",
             g->tmp, browser, g->tmp, abs, dom);
    free(abs);
    int rc = system(cmd);
    assert_int_equal(WEXITSTATUS(rc), 0);
    char *d = slurp(dom);
    assert_non_null(d);
    /* the page's own script counted the images that decoded */
    int figs = 0;
    for (int i = 0; pl_figure_name(i); i++) {
        char png[900];
        snprintf(png, sizeof(png), "%s/plots/%s.png", g->run, pl_figure_name(i));
        figs += file_size(png) > 0;
    }
    char want[64];
    snprintf(want, sizeof(want), "data-images=\"%d/%d\"", figs, figs);
    if (figs) {
        assert_non_null(strstr(d, want));
        assert_non_null(strstr(d, "data-images-ok=\"yes\""));
    }
    /* the table holds this run's numbers as the terminal table prints them: TTFT, the KV
     * bytes reserved and the load faults of each variant, median ± half the CI */
    rr_doc doc;
    char err[512];
    assert_int_equal(rr_load(g->run, &doc, err, sizeof(err)), 0);
    assert_int_equal(doc.n, 2);
    for (int v = 0; v < doc.n; v++) {
        static const char *const metrics[] = {"ttft_ms", "mod.kv.bytes_reserved", "minflt_load"};
        for (int k = 0; k < 3; k++) {
            double med = rr_summary_num(&doc.v[v], metrics[k], "median");
            double lo = rr_summary_num(&doc.v[v], metrics[k], "ci_lo"), hi = rr_summary_num(&doc.v[v], metrics[k], "ci_hi");
            double n = rr_summary_num(&doc.v[v], metrics[k], "n");
            const rm_metric *u = rr_summary_metric(&doc.v[v], metrics[k]);
            assert_non_null(u);
            assert_true(isfinite(med));
            char want_cell[96], cell[512];
            rs_fmt_value(want_cell, sizeof(want_cell), med, (hi - lo) / 2, (int)n, u->unit);
            snprintf(cell, sizeof(cell), "data-metric=\"%s\" data-variant=\"%s\">%s</td>", metrics[k], doc.v[v].key,
                     want_cell);
            if (!strstr(d, cell)) fprintf(stderr, "not in the rendered page: %s\n", cell);
            assert_non_null(strstr(d, cell));
        }
    }
    /* the terminal table's names with units; raw keys only for metrics it does not show */
    assert_non_null(strstr(d, ">TTFT (ms)</td>"));
    assert_non_null(strstr(d, ">minor faults, load (count)</td>"));
    assert_non_null(strstr(d, ">peak RSS (VmHWM) (MiB)</td>"));
    assert_non_null(strstr(d, "title=\"mod.kv.bytes_reserved\">mod.kv.bytes_reserved ("));
    assert_null(strstr(d, ">ttft_ms<"));
    /* no exponent notation in any cell (7.54975e+07, 1.261e+05 in the issue) */
    int cells = 0;
    for (const char *c = d; (c = strstr(c, "<td class=\"n\" data-metric=")); c++) {
        const char *gt = strchr(c, '>'), *end = gt ? strstr(gt, "</td>") : NULL;
        assert_non_null(end);
        for (const char *x = gt + 1; x + 1 < end; x++)
            if ((x[0] == 'e' || x[0] == 'E') && (x[1] == '+' || x[1] == '-')) {
                fprintf(stderr, "exponent in a summary cell: %.*s\n", (int)(end - gt - 1), gt + 1);
                fail();
            }
        cells++;
    }
    assert_true(cells > 20);
    assert_non_null(strstr(d, "id=\"repetitions-note\""));
    assert_non_null(strstr(d, "--repeat"));
    assert_non_null(strstr(d, "id=\"environment\""));
    assert_non_null(strstr(d, "\"as_written\""));
    rr_free(&doc);
    free(d);
}

/* A single-sequence scenario whose variants differ only in the loader: their KV caches hold
 * the same bytes at every token, so kv.png is not drawn and the report says why. */
static void test_kv_figure_skipped_when_identical(void **state) {
    (void)state;
    if (!g->ran) skip();
    if (!pl_gnuplot_found(NULL)) skip();
    char model[512], sc[700], run[700];
    assert_non_null(tu_shared("models/stories260K.bin", model, sizeof(model)));
    snprintf(sc, sizeof(sc), "%s/same_kv.json", g->tmp);
    snprintf(run, sizeof(run), "%s/same_kv", g->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o,
            "{\"name\": \"same_kv\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 8, \"seed\": 1},"
            " \"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, \"threads\": 1,"
            " \"matrix\": {\"loader\": [\"pread\", \"mmap\"], \"fixed\": {\"kv\": \"prealloc\"}}}",
            model);
    fclose(o);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, run), 0);
    char png[900], report[900], rss[900];
    snprintf(png, sizeof(png), "%s/plots/kv.png", run);
    snprintf(rss, sizeof(rss), "%s/plots/rss_timeline.gp", run);
    snprintf(report, sizeof(report), "%s/report.html", run);
    assert_int_equal(file_size(png), -1);
    char *r = slurp(report), *gp = slurp(rss);
    assert_non_null(r);
    assert_non_null(gp);
    assert_non_null(strstr(r, "id=\"skipped-kv\""));
    assert_non_null(strstr(r, "held the same bytes at every token"));
    /* pread's panel names weights and not the file map; mmap's the other way round */
    const char *pread = strstr(gp, "title \"pread\""), *mmap = strstr(gp, "title \"mmap\"");
    assert_non_null(pread);
    assert_non_null(mmap);
    const char *first = pread < mmap ? pread : mmap, *second = pread < mmap ? mmap : pread;
    char *p1 = strndup(first, (size_t)(second - first)), *p2 = strdup(second);
    char *pr = pread < mmap ? p1 : p2, *mm = pread < mmap ? p2 : p1;
    assert_non_null(strstr(pr, "weights (at phase ends)"));
    assert_null(strstr(pr, "model_file (at phase ends)"));
    assert_non_null(strstr(mm, "model_file (at phase ends)"));
    assert_null(strstr(mm, "weights (at phase ends)"));
    free(p1);
    free(p2);
    free(r);
    free(gp);
}

static void test_without_gnuplot(void **state) {
    (void)state;
    if (!g->ran) skip();
    /* a copy of the results without plots/, plotted where gnuplot cannot be found */
    char dir[800], cmd[3000], err_path[900], report[900];
    snprintf(dir, sizeof(dir), "%s/nognuplot", g->tmp);
    snprintf(err_path, sizeof(err_path), "%s/nognuplot.txt", g->tmp);
    snprintf(report, sizeof(report), "%s/report.html", dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s/results.json' '%s/'", dir, g->run, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "BENCH_GNUPLOT=/nonexistent/gnuplot '%s' plot '%s' 2>'%s'",
             getenv("BENCH_BIN") ? getenv("BENCH_BIN") : "build/asan/bench", dir, err_path);
    int rc = system(cmd);
    assert_int_equal(WEXITSTATUS(rc), 0);
    char *e = slurp(err_path), *r = slurp(report);
    assert_non_null(e);
    assert_non_null(r);
    int said = strstr(e, "gnuplot not found") != NULL, nofig = strstr(r, "No figures") != NULL;
    int table = strstr(r, "data-metric=\"ttft_ms\"") != NULL;
    /* the table's rows in view; the other metrics folded away, under named groups */
    const char *more = strstr(r, "<details id=\"more-metrics\">"), *ttft = strstr(r, "data-metric=\"ttft_ms\"");
    const char *kv = strstr(r, "data-metric=\"mod.kv.bytes_reserved\""), *grp = strstr(r, ">KV cache module's counters (");
    int folded = more && ttft && kv && grp && ttft < more && more < grp && grp < kv;
    free(e);
    free(r);
    assert_true(said);
    assert_true(nofig);
    assert_true(table);
    assert_true(folded);
    struct stat st;
    char plots[900];
    snprintf(plots, sizeof(plots), "%s/plots", dir);
    assert_int_not_equal(stat(plots, &st), 0);
}

/* An allocator scenario's results: every variant an allocator, metrics in ns/op. */
/* A real allocator run (2 allocators x 2 workloads): its figure has a bar per allocator
 * and workload, and a panel relative to the first allocator. */
static void test_alloc_figure(void **state) {
    (void)state;
    if (!g->ran) skip();
    if (!pl_gnuplot_found(NULL)) skip();
    char sc[800], dir[800];
    snprintf(sc, sizeof(sc), "%s/alloc.json", g->tmp);
    snprintf(dir, sizeof(dir), "%s/alloc", g->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"kind\": \"allocators\", \"name\": \"allocfig\", \"allocators\": [\"libc\", \"arena\"],"
               " \"workloads\": [{\"name\": \"churn64\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 20000},"
               " {\"name\": \"lifo256\", \"pattern\": \"lifo\", \"size\": 256, \"live\": 100, \"ops\": 20000}],"
               " \"repetitions\": 2, \"warmup\": 0}");
    fclose(o);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, dir), 0);
    char png[900], svg[900];
    snprintf(png, sizeof(png), "%s/plots/alloc.png", dir);
    snprintf(svg, sizeof(svg), "%s/plots/alloc.svg", dir);
    assert_true(file_size(png) > 1000);
    /* no inference phases in an allocator run: no faults figure, and the report says why */
    char faults[900], skipped[900];
    snprintf(faults, sizeof(faults), "%s/plots/faults.png", dir);
    snprintf(skipped, sizeof(skipped), "%s/plots/faults.skipped", dir);
    assert_int_equal(file_size(faults), -1);
    assert_true(text_has(skipped, "allocator run has no inference phases"));
    char *sv = slurp(svg);
    assert_non_null(sv);
    static const char *const want[] = {"ns/op", "churn64", "lifo256", "libc", "arena", "relative to libc"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!strstr(sv, want[i])) fprintf(stderr, "alloc.svg lacks \"%s\"\n", want[i]);
        assert_non_null(strstr(sv, want[i]));
    }
    free(sv);
    /* the data block holds each cell's median from the summary: libc's churn64 bar */
    char gp[900];
    snprintf(gp, sizeof(gp), "%s/plots/alloc.gp", dir);
    char *script = slurp(gp);
    assert_non_null(script);
    rr_doc d;
    char err[256];
    assert_int_equal(rr_load(dir, &d, err, sizeof(err)), 0);
    const rm_variant *v = rr_find_variant(&d, "alloc=libc,workload=churn64");
    assert_non_null(v);
    double m = rr_summary_num(v, "mod.aw.ns_per_op", "median");
    assert_true(m > 0);
    char cell[64];
    snprintf(cell, sizeof(cell), "\"churn64\" %.9g", m);
    assert_non_null(strstr(script, cell));
    rr_free(&d);
    free(script);
}

/* Strings from a scenario or results.json are anyone's (the reliability issue): a label with
 * markup, a quote, a comma, ESC and BEL; status, written and git sha edited into markup. The
 * progress line (stderr on a pseudo-terminal), the terminal table and bench compare escape
 * the control characters, results.csv doubles the
 * quote inside its quoted field, report.html escapes every field; and with generate: 1 (no
 * TPOT) the latency figure is drawn, not a gnuplot error. A synth model: no shared file. */
static void test_hostile_text_escaped(void **state) {
    (void)state;
    char dir[600], sc[700], out[700], cmd[4000], path[900];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(sc, sizeof(sc), "%s/hostile.json", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"hostile\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"seed\": 3}},"
               " \"workload\": {\"prompt_tokens\": 4, \"generate\": 1, \"seed\": 1}, \"cache\": \"warm\","
               " \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, \"matrix\": {\"kv\": [{\"name\": \"prealloc\","
               " \"label\": \"<b>x\\\"y,\\u001b[31mred\\u0007\"}, \"dynamic\"], \"fixed\": {\"loader\": \"mmap\"}}}");
    assert_int_equal(fclose(o), 0);
    const char *bin = getenv("BENCH_BIN") ? getenv("BENCH_BIN") : "build/asan/bench";
    int gp = pl_gnuplot_found(NULL);
    /* stderr on a terminal: the progress line shows each repetition's label */
    snprintf(cmd, sizeof(cmd), "XDG_CACHE_HOME='%s/xdg' %s '%s' run '%s' --out '%s' >'%s/table.txt'",
             dir, gp ? "env -u BENCH_GNUPLOT" : "env", bin, sc, out, dir);
    snprintf(path, sizeof(path), "%s/run.err", dir);
    assert_int_equal(system_pty(cmd, path), 0);
    char *t = slurp(path);
    assert_non_null(t);
    /* the progress line's own "\r\033[K" is bench's; the label's ESC [31m and BEL must not reach the terminal */
    int raw = strstr(t, "\x1b[31m") || strchr(t, 0x07), shown = strstr(t, "[1/2] <b>x\"y,\\x1b[31mred\\x07") != NULL;
    free(t);
    assert_false(raw);
    assert_true(shown);

    snprintf(path, sizeof(path), "%s/table.txt", dir);
    t = slurp(path);
    assert_non_null(t);
    raw = strchr(t, 0x1b) || strchr(t, 0x07);
    shown = strstr(t, "<b>x\"y,\\x1b[31mred\\x07") != NULL;
    free(t);
    assert_false(raw);
    assert_true(shown);

    snprintf(path, sizeof(path), "%s/results.csv", out);
    t = slurp(path);
    assert_non_null(t);
    int doubled = strstr(t, ",\"<b>x\"\"y,\x1b[31mred\x07\",") != NULL;
    free(t);
    assert_true(doubled);

    if (gp) {
        /* generate: 1 has TTFT and no TPOT: one panel, not "all points y value undefined" */
        snprintf(path, sizeof(path), "%s/run.err", dir);
        t = slurp(path);
        assert_non_null(t);
        int figerr = strstr(t, "figures:") != NULL;
        free(t);
        assert_false(figerr);
        snprintf(path, sizeof(path), "%s/plots/latency.png", out);
        assert_true(file_size(path) > 1000);
        snprintf(path, sizeof(path), "%s/plots/latency.gp", out);
        t = slurp(path);
        assert_non_null(t);
        int tpot = strstr(t, "TPOT") != NULL;
        free(t);
        assert_false(tpot);
    } else {
        fprintf(stderr, "test_plot: gnuplot not installed (scripts/deps.sh installs gnuplot-nox); the latency figure is not checked\n");
    }

    /* results.json's own fields made into markup, then the report drawn again */
    rr_doc d;
    char err[256];
    assert_int_equal(rr_load(out, &d, err, sizeof(err)), 0);
    cJSON *root = d.root;
    d.root = NULL;
    rr_free(&d);
    cJSON_ReplaceItemInObjectCaseSensitive(root, "status", cJSON_CreateString("<script>alert(1)</script>"));
    cJSON_ReplaceItemInObjectCaseSensitive(root, "written", cJSON_CreateString("<i>when</i>"));
    cJSON *git = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "environment"), "git");
    assert_non_null(git);
    cJSON_ReplaceItemInObjectCaseSensitive(git, "sha", cJSON_CreateString("<img src=x onerror=alert(2)>"));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    assert_non_null(text);
    snprintf(path, sizeof(path), "%s/results.json", out);
    o = fopen(path, "w");
    assert_non_null(o);
    fputs(text, o);
    free(text);
    assert_int_equal(fclose(o), 0);
    snprintf(cmd, sizeof(cmd), "BENCH_GNUPLOT=/nonexistent/gnuplot '%s' plot '%s' 2>/dev/null", bin, out);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    snprintf(path, sizeof(path), "%s/report.html", out);
    t = slurp(path);
    assert_non_null(t);
    int markup = strstr(t, "<script>alert") || strstr(t, "<i>when") || strstr(t, "<img src=x") || strstr(t, "<b>x");
    int escaped = strstr(t, "&lt;script&gt;alert(1)") && strstr(t, "&lt;i&gt;when") && strstr(t, "&lt;img src=x");
    free(t);
    assert_false(markup);
    assert_true(escaped);

    /* bench compare of the run with itself, every row shown: no control character on the terminal */
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' '%s' --all >'%s/cmp.txt' 2>&1", bin, out, out, dir);
    assert_true(WEXITSTATUS(system(cmd)) != 2);
    snprintf(path, sizeof(path), "%s/cmp.txt", dir);
    t = slurp(path);
    assert_non_null(t);
    raw = strchr(t, 0x1b) || strchr(t, 0x07);
    shown = strstr(t, "\\x1b[31mred") != NULL;
    free(t);
    assert_false(raw);
    assert_true(shown);
    tu_rmtree(dir);
}

/* Rewrites DIR/results.json through edit. */
static void edit_results(const char *dir, void (*edit)(cJSON *root)) {
    char path[900], err[256];
    snprintf(path, sizeof(path), "%s/results.json", dir);
    char *t = rr_slurp(path, NULL, err, sizeof(err));
    assert_non_null(t);
    cJSON *root = cJSON_Parse(t);
    free(t);
    assert_non_null(root);
    edit(root);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    assert_non_null(text);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fputs(text, o);
    free(text);
    assert_int_equal(fclose(o), 0);
}

/* every counted repetition on a busy machine; the first variant's TTFT with a CI far wider
 * than its median */
static void make_busy_and_noisy(cJSON *root) {
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(root, "runs")) {
        cJSON *ml = cJSON_GetObjectItemCaseSensitive(r, "machine_load");
        assert_non_null(ml);
        cJSON_ReplaceItemInObjectCaseSensitive(ml, "busy", cJSON_CreateTrue());
        cJSON_ReplaceItemInObjectCaseSensitive(ml, "others_cpu", cJSON_CreateNumber(0.9));
    }
    cJSON *m = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "summary"), 0), "metrics"),
        "ttft_ms");
    assert_non_null(m);
    double med = cJSON_GetObjectItemCaseSensitive(m, "median")->valuedouble;
    cJSON *ci = cJSON_CreateArray();
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(med - 20 * med));
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(med + 20 * med));
    cJSON_ReplaceItemInObjectCaseSensitive(m, "ci95", ci);
}

/* as after Ctrl-C before any repetition finished: nothing counted */
static void make_uncounted(cJSON *root) {
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(root, "runs"))
        cJSON_ReplaceItemInObjectCaseSensitive(r, "counted", cJSON_CreateFalse());
    cJSON_ReplaceItemInObjectCaseSensitive(root, "status", cJSON_CreateString("interrupted"));
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(root, "summary")) {
        cJSON_ReplaceItemInObjectCaseSensitive(r, "repetitions_counted", cJSON_CreateNumber(0));
        cJSON_ReplaceItemInObjectCaseSensitive(r, "metrics", cJSON_CreateObject());
    }
}

static int text_has(const char *path, const char *needle) {
    char *t = slurp(path);
    int found = t && strstr(t, needle);
    free(t);
    return found;
}

/* bench show prints the table of a results folder; every repetition records the machine's
 * load, and a busy machine is warned about in the table and the report; a CI wider than its
 * value reads "(noise)"; a run with nothing counted does not blame gnuplot nor promise
 * medians; "bench genrate" gets the command meant. A synth model: no shared file. */
static void test_show_busy_noise(void **state) {
    (void)state;
    char dir[600], sc[700], out[700], cmd[4000], txt[800], html[800];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(sc, sizeof(sc), "%s/show.json", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(txt, sizeof(txt), "%s/show.txt", dir);
    snprintf(html, sizeof(html), "%s/report.html", out);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"show\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"seed\": 3}},"
               " \"workload\": {\"prompt_tokens\": 4, \"generate\": 4, \"seed\": 1}, \"cache\": \"warm\","
               " \"repetitions\": 2, \"warmup\": 0, \"threads\": 1, \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}}");
    assert_int_equal(fclose(o), 0);
    const char *bin = getenv("BENCH_BIN") ? getenv("BENCH_BIN") : "build/asan/bench";
    snprintf(cmd, sizeof(cmd), "XDG_CACHE_HOME='%s/xdg' BENCH_GNUPLOT=/nonexistent/gnuplot '%s' run '%s' --out '%s' >/dev/null 2>&1",
             dir, bin, sc, out);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);

    /* each repetition recorded the machine's load, as fractions of this machine's CPUs */
    rr_doc d;
    char err[256];
    assert_int_equal(rr_load(out, &d, err, sizeof(err)), 0);
    int runs = 0, sane = 1;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d.root, "runs")) {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(r, "machine_load");
        const cJSON *cpus = cJSON_GetObjectItemCaseSensitive(ml, "cpus"), *oth = cJSON_GetObjectItemCaseSensitive(ml, "others_cpu");
        sane &= cJSON_IsNumber(cpus) && cpus->valueint == (int)sysconf(_SC_NPROCESSORS_ONLN);
        sane &= cJSON_IsNull(oth) || (cJSON_IsNumber(oth) && oth->valuedouble >= 0 && oth->valuedouble <= 1);
        sane &= cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(ml, "busy"));
        runs++;
    }
    rr_free(&d);
    assert_int_equal(runs, 4);
    assert_true(sane);

    /* the table of the folder, as bench run printed it */
    snprintf(cmd, sizeof(cmd), "'%s' show '%s' >'%s' 2>&1", bin, out, txt);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    assert_true(text_has(txt, "repetitions counted"));
    assert_true(text_has(txt, "TTFT (ms)"));
    assert_true(text_has(txt, "pread"));
    assert_true(text_has(txt, "2 repetitions per variant"));

    /* busy and noisy */
    edit_results(out, make_busy_and_noisy);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    assert_true(text_has(txt, "Warning: busy machine: in 4 of 4 counted repetitions other processes used up to 90%"));
    assert_true(text_has(txt, "(noise)"));
    snprintf(cmd, sizeof(cmd), "BENCH_GNUPLOT=/nonexistent/gnuplot '%s' plot '%s' >/dev/null 2>&1", bin, out);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    assert_true(text_has(html, "id=\"busy-machine\""));
    assert_true(text_has(html, "(noise)"));

    /* nothing counted: gnuplot is not the reason there are no figures */
    edit_results(out, make_uncounted);
    snprintf(cmd, sizeof(cmd), "%s '%s' plot '%s' >/dev/null 2>&1", pl_gnuplot_found(NULL) ? "env -u BENCH_GNUPLOT" : "env",
             bin, out);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    if (pl_gnuplot_found(NULL)) assert_false(text_has(html, "gnuplot was not found"));
    assert_true(text_has(html, "no repetition was counted"));
    assert_false(text_has(html, "enough for the medians"));
    snprintf(cmd, sizeof(cmd), "'%s' show '%s' >'%s' 2>&1", bin, out, txt);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    assert_true(text_has(txt, "No repetition was counted"));
    assert_false(text_has(txt, "enough for the medians"));

    /* a near miss of a command */
    snprintf(cmd, sizeof(cmd), "'%s' genrate >'%s' 2>&1", bin, txt);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2);
    assert_true(text_has(txt, "did you mean generate?"));
    tu_rmtree(dir);
}

static void test_plot_bad_input(void **state) {
    (void)state;
    if (!g->ran) skip();
    char err_path[800];
    snprintf(err_path, sizeof(err_path), "%s/bad.txt", g->tmp);
    assert_int_equal(tu_bench("/dev/null", "plot /nonexistent/dir 2>'%s'", err_path), 2);
    char *e = slurp(err_path);
    assert_non_null(e);
    assert_non_null(strstr(e, "/nonexistent/dir"));
    free(e);
}

/* A results.json edited to carry terminal escapes where a message quotes it (a metric's
 * name in a bad declaration): bench show, plot, compare, merge and history print the
 * message with ESC, BEL and CSI escaped as \xHH, and no raw control byte reaches stderr. */
static void test_error_messages_escaped(void **state) {
    (void)state;
    if (!g->ran) skip();
    char dir[800], res[900], src[900], log[900];
    snprintf(dir, sizeof(dir), "%s/tampered/run1", g->tmp);
    snprintf(res, sizeof(res), "%s/results.json", dir);
    snprintf(src, sizeof(src), "%s/results.json", g->run);
    snprintf(log, sizeof(log), "%s/tampered.log", g->tmp);
    assert_int_equal(ut_mkdirs(dir), 0);
    cJSON *doc = hjs_load(src);
    assert_non_null(doc);
    cJSON *metrics = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "summary"), 0), "metrics");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "class", "bogus");
    cJSON_AddItemToObject(metrics, "x\x1b]0;owned\x07\x1b[2J\xc2\x9b" "31m", m);
    assert_int_equal(hjs_save(res, doc), 0);
    cJSON_Delete(doc);
    static const char *const cmds[] = {"show '%s'", "plot '%s'", "compare '%s' '%s'", "merge '%s' --out '%s/m'", "history '%s/..'"};
    for (int i = 0; i < 5; i++) {
        char args[2000];
        snprintf(args, sizeof(args), cmds[i], dir, dir);
        assert_int_not_equal(tu_bench("/dev/null", "%s 2>'%s'", args, log), 0);
        char *e = slurp(log);
        assert_non_null(e);
        if (!strstr(e, "metrics.x\\x1b]0;owned\\x07\\x1b[2J\\xc2\\x9b31m"))
            fail_msg("bench %s: the metric's name is not quoted escaped:\n%s", cmds[i], e);
        for (const unsigned char *c = (const unsigned char *)e; *c; c++)
            if ((*c < 0x20 && *c != '\n') || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
                fail_msg("bench %s: a raw control byte 0x%02x on stderr", cmds[i], *c);
        free(e);
    }
}

/* bench show on a scenario's folder (results/SCENARIO holds runs): the runs listed newest
 * first by the time written, whatever their names; a folder without runs is an error. */
static void test_show_lists_runs(void **state) {
    (void)state;
    if (!g->ran) skip();
    char scen[800], src[900], log[900];
    snprintf(scen, sizeof(scen), "%s/scenario_folder", g->tmp);
    snprintf(src, sizeof(src), "%s/results.json", g->run);
    snprintf(log, sizeof(log), "%s/list.txt", g->tmp);
    char *text = slurp(src);
    assert_non_null(text);
    /* names in one order, times in the other: the time decides */
    static const char *const names[] = {"20990101T000000Z-old", "20000101T000000Z-new"};
    static const char *const times[] = {"2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z"};
    for (int i = 0; i < 2; i++) {
        cJSON *doc = cJSON_Parse(text);
        assert_non_null(doc);
        cJSON_ReplaceItemInObjectCaseSensitive(doc, "written", cJSON_CreateString(times[i]));
        char dir[1000], res[1100];
        snprintf(dir, sizeof(dir), "%s/%s", scen, names[i]);
        assert_int_equal(ut_mkdirs(dir), 0);
        snprintf(res, sizeof(res), "%s/results.json", dir);
        assert_int_equal(hjs_save(res, doc), 0);
        cJSON_Delete(doc);
    }
    free(text);
    assert_int_equal(tu_bench(log, "show '%s' 2>&1", scen), 0);
    char *list = slurp(log);
    assert_non_null(list);
    const char *newer = strstr(list, names[1]), *older = strstr(list, names[0]);
    if (!strstr(list, "holds 2 runs, newest first") || !newer || !older || newer > older)
        fail_msg("not the two runs newest first:\n%s", list);
    free(list);
    char empty[900];
    snprintf(empty, sizeof(empty), "%s/empty_folder", g->tmp);
    mkdir(empty, 0755);
    assert_int_equal(tu_bench("/dev/null", "show '%s' 2>/dev/null", empty), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_written_by_run),
        cmocka_unit_test(test_without_gnuplot),
        cmocka_unit_test(test_report_renders_in_chromium),
        cmocka_unit_test(test_kv_figure_skipped_when_identical),
        cmocka_unit_test(test_alloc_figure),
        cmocka_unit_test(test_plot_bad_input),
        cmocka_unit_test(test_show_lists_runs),
        cmocka_unit_test(test_error_messages_escaped),
        cmocka_unit_test(test_hostile_text_escaped),
        cmocka_unit_test(test_show_busy_noise),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
