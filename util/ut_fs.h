/* Files: a folder and its parents, and a whole (small) file in memory. */
#ifndef UT_FS_H
#define UT_FS_H

#include <stddef.h>
#include <stdio.h>

/* mkdir -p: every missing folder of path, mode 0777 before the umask. 0, or -1 with errno
 * (a path longer than PATH_MAX is ENAMETOOLONG rather than a silently shorter folder). */
int ut_mkdirs(const char *path);

/* The whole file at path, NUL-terminated (malloc'd; the caller frees), its length in *len
 * (may be NULL). A file larger than max bytes is refused rather than read, so that a wrong
 * argument (/dev/zero, a model given for a scenario) fails fast. NULL with the reason in err,
 * which names path, and errno: the open's own, EFBIG (over max), ENOMEM or EIO, so that a
 * caller can word its own message. */
char *ut_slurp(const char *path, size_t max, size_t *len, char *err, size_t errlen);
/* The same from an open stream (left open; the caller closes it), name for the messages: for a
 * caller that must read the very file it opened and checked (engines/core/model/vocab.c). */
char *ut_slurp_file(FILE *f, const char *name, size_t max, size_t *len, char *err, size_t errlen);

#endif
