/* libcurl and libmicrohttpd loaded at first use: see netlib.h. */
#include "netlib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

nl_curl nl_c;
nl_mhd nl_m;

typedef struct nl_sym {
    const char *name;
    size_t off;
} nl_sym;

/* Opens the first soname that loads and fills every slot of tab; the handle stays open for the
 * process's life (the functions are called until exit). */
static int nl_load(const char *const *sonames, const char *pkg, const nl_sym *syms, size_t n, void *tab, char *why,
                   size_t whylen) {
    void *h = NULL;
    const char *tried = sonames[0];
    for (size_t i = 0; sonames[i] && !h; i++) h = dlopen(tried = sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whylen, "cannot load %s (%s): install %s", tried, e ? e : "?", pkg);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            snprintf(why, whylen, "%s has no %s: a version too old (install %s)", tried, syms[i].name, pkg);
            return -1;
        }
        memcpy((char *)tab + syms[i].off, &f, sizeof(f));
    }
    return 0;
}

#define S(type, name, member) {name, offsetof(type, member)}
static const nl_sym curl_syms[] = {
    S(nl_curl, "curl_global_init", global_init), S(nl_curl, "curl_easy_init", easy_init),
    S(nl_curl, "curl_easy_setopt", easy_setopt), S(nl_curl, "curl_easy_getinfo", easy_getinfo),
    S(nl_curl, "curl_easy_perform", easy_perform), S(nl_curl, "curl_easy_cleanup", easy_cleanup),
    S(nl_curl, "curl_easy_strerror", easy_strerror), S(nl_curl, "curl_slist_append", slist_append),
    S(nl_curl, "curl_slist_free_all", slist_free_all), S(nl_curl, "curl_multi_init", multi_init),
    S(nl_curl, "curl_multi_cleanup", multi_cleanup), S(nl_curl, "curl_multi_add_handle", multi_add_handle),
    S(nl_curl, "curl_multi_remove_handle", multi_remove_handle), S(nl_curl, "curl_multi_perform", multi_perform),
    S(nl_curl, "curl_multi_info_read", multi_info_read), S(nl_curl, "curl_multi_poll", multi_poll),
};
static const nl_sym mhd_syms[] = {
    S(nl_mhd, "MHD_start_daemon", start_daemon), S(nl_mhd, "MHD_stop_daemon", stop_daemon),
    S(nl_mhd, "MHD_get_daemon_info", get_daemon_info), S(nl_mhd, "MHD_get_connection_info", get_connection_info),
    S(nl_mhd, "MHD_queue_response", queue_response), S(nl_mhd, "MHD_create_response_from_callback", create_response_from_callback),
    S(nl_mhd, "MHD_create_response_from_buffer", create_response_from_buffer),
    S(nl_mhd, "MHD_add_response_header", add_response_header), S(nl_mhd, "MHD_destroy_response", destroy_response),
};
#undef S

static pthread_once_t curl_once = PTHREAD_ONCE_INIT, mhd_once = PTHREAD_ONCE_INIT;
static int curl_rc, mhd_rc;
static char curl_why[512], mhd_why[512];

static void curl_load_once(void) {
    static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", NULL};
    curl_rc = nl_load(names, "libcurl4 (Debian)", curl_syms, sizeof(curl_syms) / sizeof(curl_syms[0]), &nl_c, curl_why,
                      sizeof(curl_why));
}

static void mhd_load_once(void) {
    static const char *const names[] = {"libmicrohttpd.so.12", NULL};
    mhd_rc = nl_load(names, "libmicrohttpd12 (Debian)", mhd_syms, sizeof(mhd_syms) / sizeof(mhd_syms[0]), &nl_m, mhd_why,
                     sizeof(mhd_why));
}

int nl_curl_load(char *err, size_t errlen) {
    pthread_once(&curl_once, curl_load_once);
    if (curl_rc) snprintf(err, errlen, "libcurl: %s", curl_why);
    return curl_rc;
}

int nl_mhd_load(char *err, size_t errlen) {
    pthread_once(&mhd_once, mhd_load_once);
    if (mhd_rc) snprintf(err, errlen, "libmicrohttpd: %s", mhd_why);
    return mhd_rc;
}
