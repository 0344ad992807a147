#include "procmem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pm_open(pm_proc *p, pid_t pid) {
    char path[64];
    p->pid = pid;
    p->rollup_fd = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((p->status_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return -1;
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    p->rollup_fd = open(path, O_RDONLY | O_CLOEXEC);    /* absent before Linux 4.14: Pss then unavailable */
    return 0;
}

void pm_close(pm_proc *p) {
    if (p->status_fd >= 0) close(p->status_fd);
    if (p->rollup_fd >= 0) close(p->rollup_fd);
    p->status_fd = p->rollup_fd = -1;
}

/* Reads the whole (small) file from offset 0; returns the length or -1. */
static ssize_t pm_slurp(int fd, char *buf, size_t len) {
    size_t got = 0;
    for (;;) {
        ssize_t r = pread(fd, buf + got, len - 1 - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0 || got + (size_t)r >= len - 1) { got += (size_t)(r > 0 ? r : 0); break; }
        got += (size_t)r;
    }
    buf[got] = 0;
    return (ssize_t)got;
}

/* Value in KiB of "Key:   1234 kB" in text; -1 when absent. */
static int64_t pm_field(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, key, kl) && p[kl] == ':') return strtoll(p + kl + 1, NULL, 10);
    }
    return -1;
}

int pm_read_status(pm_proc *p, pm_status *out) {
    char buf[4096];
    if (p->status_fd < 0 || pm_slurp(p->status_fd, buf, sizeof(buf)) <= 0) return -1;
    out->vm_rss = pm_field(buf, "VmRSS");
    /* a zombie has no VmRSS line: it has no memory left to report */
    if (out->vm_rss < 0) return -1;
    out->vm_hwm = pm_field(buf, "VmHWM");
    out->rss_anon = pm_field(buf, "RssAnon");
    out->rss_file = pm_field(buf, "RssFile");
    out->rss_shmem = pm_field(buf, "RssShmem");
    return 0;
}

int pm_read_pss(pm_proc *p, int64_t *pss_kib) {
    char buf[2048];
    if (p->rollup_fd < 0 || pm_slurp(p->rollup_fd, buf, sizeof(buf)) <= 0) return -1;
    *pss_kib = pm_field(buf, "Pss");
    return *pss_kib < 0 ? -1 : 0;
}

int pm_read_faults(pid_t pid, uint64_t *minflt, uint64_t *majflt) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = pm_slurp(fd, buf, sizeof(buf));
    close(fd);
    if (n <= 0) return -1;
    /* the command name may hold spaces and parentheses: fields start after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    /* after ')': state(3) ppid pgrp session tty_nr tpgid flags minflt(10) cminflt majflt(12) */
    unsigned long long v[10];
    if (sscanf(p + 2, "%*c %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7], &v[8]) != 9)
        return -1;
    *minflt = v[6];
    *majflt = v[8];
    return 0;
}

static pm_region *pm_slot(pm_smaps *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) return &s->v[i];
    if (s->n == PM_MAX_REGIONS) return &s->v[PM_MAX_REGIONS - 1];  /* folded into the last slot */
    pm_region *r = &s->v[s->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

const pm_region *pm_find_region(const pm_smaps *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) return &s->v[i];
    return NULL;
}

/* Which region a mapping belongs to, from its smaps header line; NULL: anonymous, unnamed. */
static const char *pm_classify(const char *line, const char *const *files, int n_files, char *buf, size_t len) {
    /* "start-end perms offset dev inode   path": the path starts after the 5th field */
    const char *p = line;
    for (int f = 0; f < 5 && p; f++) {
        p = strchr(p, ' ');
        if (p) while (*p == ' ') p++;
    }
    if (!p || !*p || *p == '\n') return NULL;
    size_t n = strcspn(p, "\n");
    if (!strncmp(p, "[anon:bench:", 12)) {
        size_t nl = n > 13 ? n - 13 : 0;
        if (nl >= len) nl = len - 1;
        memcpy(buf, p + 12, nl);
        buf[nl] = 0;
        return buf;
    }
    if (!strncmp(p, "[heap]", 6) || !strncmp(p, "[anon:", 6)) return NULL;
    if (*p == '[') return "other_anon";    /* [stack], [vdso], [vvar]... */
    for (int i = 0; i < n_files; i++)
        if (strlen(files[i]) == n && !strncmp(p, files[i], n)) return "model_file";
    return "other_file";
}

typedef struct pm_vma {
    uint64_t start, end;
    const char *cls;        /* NULL: unnamed anonymous */
    char name[32];
    int64_t size, rss, pss, anon;
} pm_vma;

static void pm_add(pm_region *r, const pm_vma *v, double frac) {
    r->size_kib += (int64_t)(v->size * frac + 0.5);
    r->rss_kib += (int64_t)(v->rss * frac + 0.5);
    r->pss_kib += (int64_t)(v->pss * frac + 0.5);
    r->anon_kib += (int64_t)(v->anon * frac + 0.5);
}

static void pm_flush(pm_smaps *out, const pm_vma *v, const pm_range *ranges, int n_ranges) {
    if (v->cls) {
        pm_add(pm_slot(out, v->cls), v, 1.0);
        return;
    }
    double rest = 1.0, len = (double)(v->end - v->start);
    for (int i = 0; i < n_ranges && len > 0; i++) {
        uint64_t a = ranges[i].start > v->start ? ranges[i].start : v->start;
        uint64_t b = ranges[i].end < v->end ? ranges[i].end : v->end;
        if (b <= a) continue;
        double f = (double)(b - a) / len;
        pm_add(pm_slot(out, ranges[i].name), v, f);
        rest -= f;
    }
    if (rest > 1e-9) pm_add(pm_slot(out, "other_anon"), v, rest);
}

int pm_read_smaps(pid_t pid, const char *const *files, int n_files, const pm_range *ranges, int n_ranges,
                  pm_smaps *out) {
    char path[64];
    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    pm_vma cur;
    int have = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned long long s, e;
        int off = 0;
        /* header lines start with "start-end "; field lines with a capitalised key */
        if (line[0] >= 'A' && line[0] <= 'Z') {
            long long v;
            if (!have) continue;
            if (sscanf(line, "Size: %lld", &v) == 1) cur.size += v;
            else if (sscanf(line, "Rss: %lld", &v) == 1) cur.rss += v;
            else if (sscanf(line, "Pss: %lld", &v) == 1) cur.pss += v;
            else if (sscanf(line, "Anonymous: %lld", &v) == 1) cur.anon += v;
            continue;
        }
        if (sscanf(line, "%llx-%llx %n", &s, &e, &off) < 2 || !off) continue;
        if (have) pm_flush(out, &cur, ranges, n_ranges);
        memset(&cur, 0, sizeof(cur));
        cur.start = s;
        cur.end = e;
        cur.cls = pm_classify(line, files, n_files, cur.name, sizeof(cur.name));
        have = 1;
    }
    if (have) pm_flush(out, &cur, ranges, n_ranges);
    free(line);
    fclose(f);
    return 0;
}
