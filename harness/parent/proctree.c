/* The memory of a process tree: see proctree.h. */
#include "proctree.h"

#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/ut_vec.h"

pt_tree *pt_create(pid_t root) {
    pt_tree *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    t->root = root;
    t->peak_pss_kib = -1;
    return t;
}

void pt_free(pt_tree *t) {
    if (!t) return;
    free(t->m);
    free(t);
}

/* One process's /proc/<pid>/stat: comm, ppid, minflt, majflt. 0, or -1 when it is gone. */
typedef struct pt_stat {
    pid_t pid, ppid;
    char comm[32];
    uint64_t minflt, majflt;
} pt_stat;

static int pt_read_stat(pid_t pid, pt_stat *s) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    /* "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt ...": comm
     * may hold spaces and parentheses, so it ends at the last ')' */
    char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
    if (!open_p || !close_p || close_p < open_p) return -1;
    size_t cl = (size_t)(close_p - open_p - 1);
    snprintf(s->comm, sizeof(s->comm), "%.*s", (int)(cl < sizeof(s->comm) ? cl : sizeof(s->comm) - 1), open_p + 1);
    int ppid;
    unsigned long long minflt, cminflt, majflt;
    if (sscanf(close_p + 1, " %*c %d %*d %*d %*d %*d %*u %llu %llu %llu", &ppid, &minflt, &cminflt, &majflt) != 4) return -1;
    s->pid = pid;
    s->ppid = ppid;
    s->minflt = minflt;
    s->majflt = majflt;
    return 0;
}

/* Every process's stat; *n of them. NULL with *n 0 when /proc cannot be read. */
static pt_stat *pt_all(int *n) {
    *n = 0;
    DIR *d = opendir("/proc");
    if (!d) return NULL;
    pt_stat *v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        pt_stat s;
        if (pt_read_stat((pid_t)pid, &s)) continue;     /* gone since readdir */
        if (UT_VEC_RESERVE(v, cap, *n + 1)) break;
        v[(*n)++] = s;
    }
    closedir(d);
    return v;
}

/* The member for pid, added where new; NULL out of memory. */
static pt_member *pt_member_of(pt_tree *t, pid_t pid) {
    for (int i = 0; i < t->n; i++)
        if (t->m[i].pid == pid) return &t->m[i];
    if (UT_VEC_RESERVE(t->m, t->cap, t->n + 1)) return NULL;
    pt_member *m = &t->m[t->n++];
    memset(m, 0, sizeof(*m));
    m->pid = pid;
    m->peak_pss_kib = -1;
    return m;
}

static int pt_by_pid(const void *a, const void *b) {
    pid_t x = ((const pt_stat *)a)->pid, y = ((const pt_stat *)b)->pid;
    return (x > y) - (x < y);
}

/* Marks in[] the processes of all[] (sorted here by pid) below the root, the root included:
 * each walks up its ppids until it meets the root (in), a process outside (out) or none. */
static void pt_mark(const pt_tree *t, pt_stat *all, int n, char *in) {
    enum { UNKNOWN, IN, OUT };
    qsort(all, (size_t)n, sizeof(*all), pt_by_pid);
    for (int i = 0; i < n; i++) in[i] = all[i].pid == t->root ? IN : UNKNOWN;
    for (int i = 0; i < n; i++) {
        int k = i, steps = 0;
        /* up to the first process whose answer is known; a loop (none in a real /proc) ends at n steps */
        while (in[k] == UNKNOWN && steps++ < n) {
            pt_stat key = {.pid = all[k].ppid};
            const pt_stat *up = all[k].ppid > 0 ? bsearch(&key, all, (size_t)n, sizeof(*all), pt_by_pid) : NULL;
            if (!up) {
                in[k] = OUT;
                break;
            }
            k = (int)(up - all);
        }
        char v = in[k] == IN ? IN : OUT;
        /* the same answer for the whole path walked */
        for (int j = i; in[j] == UNKNOWN;) {
            in[j] = v;
            pt_stat key = {.pid = all[j].ppid};
            const pt_stat *up = bsearch(&key, all, (size_t)n, sizeof(*all), pt_by_pid);
            if (!up) break;
            j = (int)(up - all);
        }
    }
    for (int i = 0; i < n; i++) in[i] = in[i] == IN;
}

/* Adds one live member's figures to out. 0, or -1 when it exited meanwhile. */
static int pt_add(pt_tree *t, const pt_stat *s, int with_pss, pt_sum *out) {
    pm_proc pp = {.status_fd = -1, .rollup_fd = -1};
    pm_status st;
    if (pm_open(&pp, s->pid) || pm_read_status(&pp, &st)) {
        pm_close(&pp);
        return -1;
    }
    int64_t pss = -1;
    if (with_pss && pm_read_pss(&pp, &pss)) pss = -1;
    pm_close(&pp);
    pt_member *m = pt_member_of(t, s->pid);
    if (!m) return -1;
    snprintf(m->comm, sizeof(m->comm), "%s", s->comm);
    m->alive = 1;
    m->peak_rss_kib = st.vm_hwm;
    if (pss > m->peak_pss_kib) m->peak_pss_kib = pss;
    out->st.vm_rss += st.vm_rss;
    out->st.rss_anon += st.rss_anon > 0 ? st.rss_anon : 0;
    out->st.rss_file += st.rss_file > 0 ? st.rss_file : 0;
    out->st.rss_shmem += st.rss_shmem > 0 ? st.rss_shmem : 0;
    if (!with_pss || pss < 0) out->pss_kib = -1;
    else if (out->pss_kib >= 0) out->pss_kib += pss;
    out->minflt += s->minflt;
    out->majflt += s->majflt;
    out->n++;
    return 0;
}

int pt_sample(pt_tree *t, int with_pss, pt_sum *out) {
    int n;
    pt_stat *all = pt_all(&n);
    char *in = n ? calloc((size_t)n, 1) : NULL;
    if (!all || !in) {
        free(all);
        free(in);
        return -1;
    }
    pt_mark(t, all, n, in);
    pt_sum sum;
    memset(&sum, 0, sizeof(sum));
    sum.pss_kib = with_pss ? 0 : -1;
    for (int i = 0; i < t->n; i++) t->m[i].alive = 0;
    /* the root first, so that it is the first member */
    int root_ok = 0;
    for (int i = 0; i < n; i++)
        if (in[i] && all[i].pid == t->root) root_ok = pt_add(t, &all[i], with_pss, &sum) == 0;
    for (int i = 0; root_ok && i < n; i++)
        if (in[i] && all[i].pid != t->root) pt_add(t, &all[i], with_pss, &sum);
    free(all);
    free(in);
    if (!root_ok) return -1;
    if (sum.st.vm_rss > t->peak_rss_kib) t->peak_rss_kib = sum.st.vm_rss;
    if (sum.pss_kib > t->peak_pss_kib) t->peak_pss_kib = sum.pss_kib;
    sum.st.vm_hwm = t->peak_rss_kib;
    *out = sum;
    return 0;
}

cJSON *pt_json(const pt_tree *t) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "root", t->root);
    cJSON_AddNumberToObject(o, "peak_rss_kib", (double)t->peak_rss_kib);
    if (t->peak_pss_kib >= 0) cJSON_AddNumberToObject(o, "peak_pss_kib", (double)t->peak_pss_kib);
    cJSON *ps = cJSON_AddArrayToObject(o, "processes");
    for (int i = 0; ps && i < t->n; i++) {
        const pt_member *m = &t->m[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) break;
        cJSON_AddNumberToObject(x, "pid", m->pid);
        cJSON_AddStringToObject(x, "comm", m->comm);
        cJSON_AddNumberToObject(x, "peak_rss_kib", (double)m->peak_rss_kib);
        if (m->peak_pss_kib >= 0) cJSON_AddNumberToObject(x, "peak_pss_kib", (double)m->peak_pss_kib);
        cJSON_AddItemToArray(ps, x);
    }
    return o;
}
