/* libcurl and libmicrohttpd, loaded when an http target or bench serve first needs them, not
 * linked into bench: linked, they and what they pull in (TLS, compression, IDN: about 6 MiB of
 * file-backed pages and 1 MiB of relocated data) were mapped into every worker of every
 * scenario, and the CI gate saw its stories260K worker's RSS double. A memory harness must not
 * carry them where nothing uses them.
 *
 * The tables hold the functions harness/net calls, with the headers' own types (the -dev
 * packages give those at build time); nl_curl_load / nl_mhd_load fill them once (dlopen of the
 * library's soname, dlsym of each name), and every call goes through nl_c / nl_m. */
#ifndef BENCH_NETLIB_H
#define BENCH_NETLIB_H

#include <stddef.h>
#include <stdint.h>
#include <curl/curl.h>
#include <microhttpd.h>

typedef struct nl_curl {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    CURLcode (*easy_perform)(CURL *h);
    void (*easy_cleanup)(CURL *h);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *m);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned int n, int timeout_ms, int *ret);
} nl_curl;

typedef struct nl_mhd {
    struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void *apc_cls,
                                       MHD_AccessHandlerCallback dh, void *dh_cls, ...);
    void (*stop_daemon)(struct MHD_Daemon *d);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *d, enum MHD_DaemonInfoType t, ...);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *c, enum MHD_ConnectionInfoType t, ...);
    enum MHD_Result (*queue_response)(struct MHD_Connection *c, unsigned int status, struct MHD_Response *r);
    struct MHD_Response *(*create_response_from_callback)(uint64_t size, size_t block_size, MHD_ContentReaderCallback crc,
                                                          void *crc_cls, MHD_ContentReaderFreeCallback crfc);
    struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode);
    enum MHD_Result (*add_response_header)(struct MHD_Response *r, const char *header, const char *content);
    void (*destroy_response)(struct MHD_Response *r);
} nl_mhd;

extern nl_curl nl_c;
extern nl_mhd nl_m;

/* Fill nl_c (nl_m) once; 0, or -1 with err naming the library and what to install. */
int nl_curl_load(char *err, size_t errlen);
int nl_mhd_load(char *err, size_t errlen);

#endif
