/* Which other bench processes use a model file now (modeluse.h). */
#include "harness/parent/modeluse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/ut_fs.h"

int mu_enter(const char *dir, unsigned long long dev, unsigned long long ino, mu_mark *m, char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    snprintf(m->dir, sizeof(m->dir), "%s", dir);
    m->dev = dev;
    m->ino = ino;
    if (ut_mkdirs(dir)) return snprintf(err, errlen, "%s: %s", dir, strerror(errno)), -1;
    char path[sizeof(m->path)];
    snprintf(path, sizeof(path), "%s/%llx-%llx.%d", dir, dev, ino, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1;
    close(fd);
    snprintf(m->path, sizeof(m->path), "%s", path);
    return 0;
}

/* Whether pid is a live process named bench (its comm, as the kernel keeps it). */
static int mu_is_bench(int pid) {
    if (kill(pid, 0) && errno != EPERM) return 0;
    char p[64], comm[32] = "";
    snprintf(p, sizeof(p), "/proc/%d/comm", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    int ok = fgets(comm, sizeof(comm), f) != NULL;
    fclose(f);
    return ok && !strncmp(comm, "bench", 5);
}

int mu_other(const mu_mark *m) {
    if (!m->dir[0]) return 0;
    char prefix[64];
    int n = snprintf(prefix, sizeof(prefix), "%llx-%llx.", m->dev, m->ino);
    DIR *d = opendir(m->dir);
    if (!d) return 0;
    int other = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, prefix, (size_t)n)) continue;
        char *end;
        long pid = strtol(de->d_name + n, &end, 10);
        if (*end || pid <= 0 || pid > 4194304 || pid == getpid()) continue;
        if (mu_is_bench((int)pid)) {
            if (!other) other = (int)pid;
            continue;
        }
        char stale[PATH_MAX + 300];
        snprintf(stale, sizeof(stale), "%s/%s", m->dir, de->d_name);
        unlink(stale);
    }
    closedir(d);
    return other;
}

void mu_leave(mu_mark *m) {
    if (m->path[0]) unlink(m->path);
    m->path[0] = 0;
}
