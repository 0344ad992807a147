/* bench compare A B: what changed between two runs, and is it a regression. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/compare.h"
#include "util/ut_vec.h"

static void compare_usage(FILE *f) {
    fprintf(f,
            "usage: bench compare A B | --ab DIR  [--threshold 5%%] [--format table|markdown|json] [--all | --brief]\n"
            "                     [--deterministic-only] [--ratio METRIC:AXIS=V/AXIS=W[:FACTOR]]...\n\n"
            "Compares run B against run A (results directories or results.json files), per variant\n"
            "(matched by key) and metric: A and B medians, the change, the test and a verdict.\n"
            "  timed metrics (ms, tok/s, ns/op): Mann-Whitney U on the repetitions, its p adjusted by\n"
            "      Holm over every timed metric compared (at most 5%% chance of any false alarm);\n"
            "      \"too few repetitions\" when even the most extreme ranking could not reach that\n"
            "      (4 + 4 for one metric, 8 + 8 for a hundred); a regression is beyond noise and worse\n"
            "      than its noise floor: the larger of --threshold (default 5%%) and the two runs' own\n"
            "      spreads added (IQR / median). Two separate runs are confounded by drift (the machine\n"
            "      changes between them): the output says so, and only changes above the floor count.\n"
            "  page faults: tolerance 5%% + 16; memory (MiB): 2%% + 0.25 MiB; module counters\n"
            "      (bytes, allocations, grow events): exact. A change in the worse direction is a\n"
            "      regression.\n"
            "  context switches, page-cache residency, PSS (shared with other processes): shown, never\n"
            "      gated\n\n"
            "  --deterministic-only  timed metrics are shown but not gated (the CI gate: times are\n"
            "                        graphed, not gated)\n"
            "  --ratio SPEC          gate a ratio inside each run: METRIC of the variants with AXIS=V\n"
            "                        over those with AXIS=W (other axes equal); B's ratio must stay\n"
            "                        within FACTOR (default 1.5) of A's\n"
            "  --ab DIR              an interleaved A/B run of scripts/ab.sh (DIR/a/round-*, DIR/b/round-*):\n"
            "                        times judged on paired differences, round by round (Wilcoxon\n"
            "                        signed-rank, Holm), free of the drift between two separate runs\n"
            "  --all                 every row (the default shows what changed or could not be judged)\n"
            "  --brief               only the rows that changed\n\n"
            "      With fewer repetitions, a change of more than 50%% with the two runs' ranges apart\n"
            "      (2 + 2 repetitions at least) is flagged anyway, marked \"(far)\".\n\n"
            "Exit status:\n"
            "  0  every gated metric was judged and none regressed\n"
            "  1  a regression (far changes included)\n"
            "  2  bad arguments or unreadable results\n"
            "  3  no regression found, but some metrics could not be judged (too few repetitions,\n"
            "     or in one run only): not a pass. The count and the reasons head the output.\n\n"
            "examples:\n"
            "  bench compare results/ci/run1 results/ci/run2\n"
            "  bench compare results/baselines/ci.json results/ci/latest --deterministic-only --brief \\\n"
            "      --ratio mod.kv.bytes_reserved:kv=prealloc/kv=dynamic\n");
}

static int cmp_name_order(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The rounds of one side of an A/B folder (scripts/ab.sh): DIR/SIDE/round-*, loaded in name
 * order into *docs. Returns their count, or -1 with err. */
static int ab_load(const char *dir, const char *side, rr_doc **docs, char *err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, side);
    *docs = NULL;
    DIR *dp = opendir(path);
    if (!dp) {
        snprintf(err, errlen, "%.900s: not an A/B folder of scripts/ab.sh (no %s/ in it)", dir, side);
        return -1;
    }
    char **names = NULL;
    int n = 0, cap = 0, rc = -1;
    for (struct dirent *e; (e = readdir(dp));) {
        /* the rounds' folders, not their logs (round-NNN.log) */
        if (strncmp(e->d_name, "round-", 6) || strchr(e->d_name, '.')) continue;
        if (UT_VEC_RESERVE(names, cap, n + 1)) goto out;
        if (!(names[n] = strdup(e->d_name))) goto out;
        n++;
    }
    if (!n) {
        snprintf(err, errlen, "%.900s: no round-* folders: scripts/ab.sh has not finished a round", path);
        goto out;
    }
    qsort(names, (size_t)n, sizeof(*names), cmp_name_order);
    *docs = calloc((size_t)n, sizeof(**docs));
    if (!*docs) goto out;
    for (int i = 0; i < n; i++) {
        char rp[4400];
        snprintf(rp, sizeof(rp), "%s/%s", path, names[i]);
        if (rr_load(rp, &(*docs)[i], err, errlen)) {
            for (int k = 0; k < i; k++) rr_free(&(*docs)[k]);
            free(*docs);
            *docs = NULL;
            goto out;
        }
    }
    rc = n;
out:
    if (rc < 0 && !err[0]) snprintf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    closedir(dp);
    return rc;
}

int cmd_compare(int argc, char **argv) {
    const char *pa = NULL, *pb = NULL, *ab = NULL;
    rr_doc *ra = NULL, *rb = NULL;
    int na = 0, nb = 0;
    cmp_opts o = {.threshold = 0.05};
    cmp_format fmt = CMP_FMT_TABLE;
    cmp_show show = CMP_SHOW_CHANGED;
    int nratios = 0;
    cmp_ratio *ratios = calloc((size_t)argc, sizeof(*ratios));
    char err[1024];
    int rc = 2;
    rr_doc a = {0}, b = {0};
    cmp_report rep = {0};
    if (!ratios) {
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *x = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(x, "--help") || !strcmp(x, "-h")) {
            compare_usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(x, "--threshold") && v) {
            char *end;
            double t = strtod(argv[++i], &end);
            if (end == argv[i] || (*end && strcmp(end, "%")) || !(t >= 0) || t > 1000) {
                fprintf(stderr, "bench compare: --threshold %s: expected a percentage such as 5%%\n", argv[i]);
                goto out;
            }
            o.threshold = t / 100;
        } else if (!strcmp(x, "--format") && v) {
            i++;
            if (!strcmp(v, "table")) fmt = CMP_FMT_TABLE;
            else if (!strcmp(v, "markdown")) fmt = CMP_FMT_MARKDOWN;
            else if (!strcmp(v, "json")) fmt = CMP_FMT_JSON;
            else {
                fprintf(stderr, "bench compare: --format %s: expected table, markdown or json\n", v);
                goto out;
            }
        } else if (!strcmp(x, "--ratio") && v) {
            if (cmp_parse_ratio(argv[++i], &ratios[nratios], err, sizeof(err))) {
                cli_say("compare", "%s", err);
                goto out;
            }
            nratios++;
        } else if (!strcmp(x, "--ab") && v) {
            ab = argv[++i];
        } else if (!strcmp(x, "--brief")) show = CMP_SHOW_BRIEF;
        else if (!strcmp(x, "--all")) show = CMP_SHOW_ALL;
        else if (!strcmp(x, "--deterministic-only")) o.deterministic_only = 1;
        else if (x[0] != '-' && !pa) pa = x;
        else if (x[0] != '-' && !pb) pb = x;
        else {
            static const char *const known[] = {"--threshold", "--format", "--ratio", "--brief", "--all", "--ab", "--deterministic-only",
                                                "--help", NULL};
            cli_bad_arg(stderr, "compare", x, known);
            goto out;
        }
    }
    if (ab) {
        err[0] = 0;
        if (pa || (na = ab_load(ab, "a", &ra, err, sizeof(err))) < 0 || (nb = ab_load(ab, "b", &rb, err, sizeof(err))) < 0) {
            cli_say("compare", "%s", pa ? "--ab DIR takes no other runs (bench compare --ab DIR)" : err);
            goto out;
        }
        if (na != nb) {
            fprintf(stderr, "bench compare: %s: %d rounds of A and %d of B: an unfinished round? (pairs need both)\n", ab,
                    na, nb);
            goto out;
        }
        if (cmp_paired(ra, rb, na, &o, &rep, err, sizeof(err))) {
            cli_say("compare", "%s", err);
            goto out;
        }
        cmp_print(stdout, &rep, fmt, show, &o);
        rc = cmp_exit_status(&rep);
        goto out;
    }
    if (!pa || !pb) {
        fprintf(stderr, "bench compare: which two runs? (bench compare A B)\n\n");
        compare_usage(stderr);
        goto out;
    }
    if (rr_load(pa, &a, err, sizeof(err)) || rr_load(pb, &b, err, sizeof(err))) {
        cli_say("compare", "%s", err);
        goto out;
    }
    if (cmp_docs(&a, &b, &o, &rep, err, sizeof(err))) {
        cli_say("compare", "%s", err);
        goto out;
    }
    for (int i = 0; i < nratios; i++)
        if (!cmp_ratios(&a, &b, &ratios[i], &rep)) {
            fprintf(stderr, "bench compare: --ratio %s:%s/%s: no pair of variants in B matches\n", ratios[i].metric,
                    ratios[i].num, ratios[i].den);
            goto out;
        }
    cmp_print(stdout, &rep, fmt, show, &o);
    rc = cmp_exit_status(&rep);
out:
    for (int i = 0; ra && i < na; i++) rr_free(&ra[i]);
    for (int i = 0; rb && i < nb; i++) rr_free(&rb[i]);
    free(ra);
    free(rb);
    cmp_report_free(&rep);
    rr_free(&a);
    rr_free(&b);
    free(ratios);
    return rc;
}
