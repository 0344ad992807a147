/* bench serve as OpenAI clients use it (harness/net/oai_req.h, chat_tmpl.h, stopstr.h):
 *   - the chat templates: each recognised by its marker in a real-looking Jinja text, an
 *     unknown one refused naming --chat-template, each rendered exactly;
 *   - stop strings on byte strings: the earliest match, searched from where the last search
 *     ended; the hold-back of a stream's tail (a stop string's start, a part of a character);
 *   - on loopback, on stories260K (no chat template: "plain"): POST /v1/chat/completions not
 *     streamed and streamed (the same text, role first, [DONE]) and equal to the completion of
 *     the rendered prompt; a stop string cuts the text before it (finish_reason "stop"),
 *     streamed too; a stop id ends the choice; n=2 gives two choices (equal when greedy),
 *     sampled choices differ and repeat with the seed; an unknown field, n=100, logprobs true
 *     are 400 naming the field; known-but-ignored fields come back in X-Bench-Ignored-Fields;
 *     --lenient takes unknown fields and names them;
 *   - a GGUF carrying tokenizer.chat_template (stories260K written with one): chatml recognised,
 *     its <|im_start|>/<|im_end|> encoded as their vocabulary ids; a template bench does not
 *     know refuses chat (completions still served) until one is named;
 *   - the openai npm package (tests/openai/client.mjs) against `bench serve`: skipped, naming
 *     what is missing, without node or without build/node_modules/openai (make openai-client).
 * Skips the server tests without the shared model files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/model/model_write.h"
#include "engines/core/runtime/engine.h"
#include "harness/net/chat_tmpl.h"
#include "harness/net/server.h"
#include "harness/net/stopstr.h"
#include "tests/lib/testutil.h"

extern char **environ;

/* ======================================================================
 * Templates and stop strings, as pure functions
 * ====================================================================== */

static void test_template_detect(void **state) {
    (void)state;
    static const struct { const char *jinja, *want; } cases[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", "chatml"},
        {"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
         "message['content'] | trim + '<|eot_id|>' }}{% endfor %}", "llama-3"},
        {"{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}"
         "{% endif %}{% endfor %}", "llama-2"},
        {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}"
         "{% endif %}{% endfor %}", "zephyr"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const ct_template *t = NULL;
        assert_int_equal(ct_detect(cases[i].jinja, &t, err, sizeof(err)), 0);
        assert_string_equal(ct_name(t), cases[i].want);
        assert_ptr_equal(ct_find(cases[i].want), t);
    }
    const ct_template *t = NULL;
    assert_int_equal(ct_detect(NULL, &t, err, sizeof(err)), 0);
    assert_string_equal(ct_name(t), "plain");
    /* Gemma's turns: none of the table's markers */
    assert_int_equal(ct_detect("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", &t, err,
                               sizeof(err)), -1);
    assert_null(t);
    assert_non_null(strstr(err, "--chat-template NAME"));
    assert_non_null(strstr(err, "chatml"));
    assert_non_null(strstr(err, "<start_of_turn>"));
    assert_null(ct_find("vicuna"));
}

static void test_template_render(void **state) {
    (void)state;
    const ct_msg msgs[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Tell me a story"}};
    static const struct { const char *name, *want; } cases[] = {
        {"chatml", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
                   "<|im_start|>user\nTell me a story<|im_end|>\n<|im_start|>assistant\n"},
        {"llama-3", "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi"
                    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user"
                    "<|end_header_id|>\n\nTell me a story<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
        {"llama-2", "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Tell me a story [/INST]"},
        {"zephyr", "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n<|user|>\nTell me a story</s>\n<|assistant|>\n"},
        {"plain", "system: Be brief.\nuser: Hi\nassistant: Hello.\nuser: Tell me a story\nassistant:"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = ct_render(ct_find(cases[i].name), msgs, 4);
        assert_non_null(text);
        if (strcmp(text, cases[i].want)) fail_msg("%s rendered\n%s\nwant\n%s", cases[i].name, text, cases[i].want);
        free(text);
    }
}

static void test_stop_strings(void **state) {
    (void)state;
    const char *stops[] = {"time", "\n\n"};
    const char *t = "Once upon a time\n\nthe end";
    assert_int_equal(stop_find(t, strlen(t), 0, stops, 2), 12);
    /* searched up to byte 14 already: "time" ends at 16, after 14: still found */
    assert_int_equal(stop_find(t, strlen(t), 14, stops, 2), 12);
    /* the earliest of two */
    const char *two[] = {"end", "upon"};
    assert_int_equal(stop_find(t, strlen(t), 0, two, 2), 5);
    assert_int_equal(stop_find("Once upon", 9, 0, stops, 2), -1);
    /* hold back what may become a stop string, and nothing else */
    assert_int_equal(stop_holdback("Once upon a ti", 14, stops, 2), 2);
    assert_int_equal(stop_holdback("Once upon a t", 13, stops, 2), 1);
    assert_int_equal(stop_holdback("Once upon a ", 12, stops, 2), 0);
    assert_int_equal(stop_holdback("Once\n", 5, stops, 2), 1);
    assert_int_equal(stop_holdback("Once upon a", 11, stops, 2), 0);
    /* an unfinished character: the first byte of a 3-byte é... (U+2581 is e2 96 81) */
    assert_int_equal(stop_holdback("ab\xe2\x96", 4, stops, 0), 2);
    assert_int_equal(stop_holdback("ab\xe2\x96\x81", 5, stops, 0), 0);
    assert_int_equal(stop_holdback("ab\xc3", 3, stops, 0), 1);
}

/* ======================================================================
 * bench serve in this process, on loopback
 * ====================================================================== */

typedef struct fx {
    char model[512], tok[512], tmp[512];
    engine *e;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) || !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)))
        return 0;
    tu_tmpdir(f->tmp, sizeof(f->tmp));
    engine_spec es = {.model_path = f->model, .tokenizer_path = f->tok, .threads = 1, .max_seqs = 4, .module_dir = tu_module_dir()};
    char err[512];
    if (engine_create(&es, &f->e, err, sizeof(err))) {
        fprintf(stderr, "engine_create: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) {
        engine_destroy(f->e);
        if (f->tmp[0]) tu_rmtree(f->tmp);
    }
    free(f);
    return 0;
}

static hs_server *start(engine *e, const char *tmpl, int lenient) {
    hs_opts o = {.model_name = "stories", .chat_template = tmpl, .lenient = lenient};
    hs_server *s = NULL;
    char err[512];
    if (hs_start(e, &o, &s, err, sizeof(err))) fail_msg("hs_start: %s", err);
    return s;
}

typedef struct resp {
    long status;
    char *body, *headers;
    size_t n, hn;
} resp;

static size_t grow(char **p, size_t *n, const char *d, size_t k) {
    char *q = realloc(*p, *n + k + 1);
    if (!q) return 0;
    memcpy(q + *n, d, k);
    *p = q;
    *n += k;
    q[*n] = 0;
    return k;
}

static size_t on_body(char *d, size_t size, size_t nm, void *user) {
    resp *r = user;
    return grow(&r->body, &r->n, d, size * nm);
}

static size_t on_header(char *d, size_t size, size_t nm, void *user) {
    resp *r = user;
    return grow(&r->headers, &r->hn, d, size * nm);
}

/* POST body to path; the status, body and headers. */
static resp post(hs_server *s, const char *path, const char *body) {
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", hs_port(s), path);
    resp r = {0};
    CURL *h = curl_easy_init();
    assert_non_null(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(h);
    if (!r.body) r.body = strdup("");
    if (!r.headers) r.headers = strdup("");
    return r;
}

static void resp_free(resp *r) {
    free(r->body);
    free(r->headers);
}

/* The value of header name (case-insensitive) into buf; "" when absent. */
static const char *header(const resp *r, const char *name, char *buf, size_t len) {
    size_t nl = strlen(name);
    buf[0] = 0;
    for (const char *p = r->headers; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1, *e = strpbrk(v, "\r\n");
            while (*v == ' ') v++;
            snprintf(buf, len, "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
        }
    return buf;
}

/* A 200 JSON answer, parsed (the test fails otherwise). */
static cJSON *post_json(hs_server *s, const char *path, const char *body, resp *keep) {
    resp r = post(s, path, body);
    if (r.status != 200) fail_msg("POST %s %s: %ld %s", path, body, r.status, r.body);
    cJSON *j = cJSON_Parse(r.body);
    assert_non_null(j);
    if (keep) *keep = r;
    else resp_free(&r);
    return j;
}

static const cJSON *choice(const cJSON *j, int i) { return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), i); }

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v)) fail_msg("no string %s", key);
    return v->valuestring;
}

/* A streamed answer's text per choice (text or delta.content, joined) into texts[i] (grown,
 * free them), finish reasons into fin[i]; the events' "object"s all equal object; [DONE] last.
 * Returns the number of events. */
static int read_stream(const char *body, const char *object, char **texts, char fin[][16], int n_choices, int *role_first) {
    int events = 0, seen_done = 0;
    *role_first = 0;
    for (const char *p = strstr(body, "data: "); p; p = strstr(p + 6, "data: ")) {
        assert_false(seen_done);
        if (!strncmp(p + 6, "[DONE]", 6)) {
            seen_done = 1;
            continue;
        }
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        cJSON *j = cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6));
        assert_non_null(j);
        assert_string_equal(str(j, "object"), object);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "choices")) {
            int i = cJSON_GetObjectItemCaseSensitive(c, "index")->valueint;
            assert_true(i >= 0 && i < n_choices);
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(c, "delta");
            const cJSON *t = d ? cJSON_GetObjectItemCaseSensitive(d, "content") : cJSON_GetObjectItemCaseSensitive(c, "text");
            if (d && events == 0 && cJSON_GetObjectItemCaseSensitive(d, "role")) *role_first = 1;
            if (cJSON_IsString(t)) {
                size_t a = strlen(texts[i]), b = strlen(t->valuestring);
                texts[i] = realloc(texts[i], a + b + 1);
                memcpy(texts[i] + a, t->valuestring, b + 1);
            }
            const cJSON *fr = cJSON_GetObjectItemCaseSensitive(c, "finish_reason");
            if (cJSON_IsString(fr)) snprintf(fin[i], 16, "%s", fr->valuestring);
        }
        cJSON_Delete(j);
        events++;
    }
    assert_true(seen_done);
    return events;
}

#define STORY "\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story\"}]"

static void test_chat(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f->e, NULL, 0);
    resp r;
    cJSON *j = post_json(s, "/v1/chat/completions", "{\"model\": \"any\", " STORY ", \"max_tokens\": 24, \"temperature\": 0, "
                         "\"ignore_eos\": true}", &r);
    char h[256];
    assert_string_equal(header(&r, "X-Bench-Chat-Template", h, sizeof(h)), "plain (fallback: the model has no chat template)");
    resp_free(&r);
    assert_string_equal(str(j, "object"), "chat.completion");
    assert_non_null(strstr(str(j, "system_fingerprint"), "chat-template=plain"));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(choice(j, 0), "message");
    assert_string_equal(str(m, "role"), "assistant");
    char *text = strdup(str(m, "content"));
    assert_true(strlen(text) > 10);
    assert_string_equal(str(choice(j, 0), "finish_reason"), "length");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "usage"), "completion_tokens")->valueint, 24);
    cJSON_Delete(j);

    /* the template, exactly: the completion of the rendered prompt is the same answer */
    j = post_json(s, "/v1/completions", "{\"prompt\": \"user: Tell me a story\\nassistant:\", \"max_tokens\": 24, \"temperature\": 0, "
                  "\"ignore_eos\": true}", NULL);
    assert_string_equal(str(choice(j, 0), "text"), text);
    cJSON_Delete(j);

    /* streamed: the role first, then the same text, and [DONE] */
    r = post(s, "/v1/chat/completions", "{" STORY ", \"max_tokens\": 24, \"temperature\": 0, \"ignore_eos\": true, \"stream\": true}");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(header(&r, "Content-Type", h, sizeof(h)), "text/event-stream"));
    char *texts[1] = {strdup("")}, fin[1][16] = {""};
    int role_first;
    int events = read_stream(r.body, "chat.completion.chunk", texts, fin, 1, &role_first);
    assert_true(role_first);
    assert_int_equal(events, 1 + 24);
    assert_string_equal(texts[0], text);
    assert_string_equal(fin[0], "length");
    free(texts[0]);
    resp_free(&r);
    free(text);
    hs_stop(s);
}

/* The greedy text of the story prompt (completions), and a stop string cut from its middle:
 * its first occurrence at *at, past the first token. */
static char *story_and_stop(hs_server *s, char *stop, size_t len, long *at) {
    cJSON *j = post_json(s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"temperature\": 0, "
                         "\"ignore_eos\": true}", NULL);
    char *text = strdup(str(choice(j, 0), "text"));
    cJSON_Delete(j);
    size_t n = strlen(text);
    assert_true(n > 30);
    snprintf(stop, len, "%.5s", text + n / 2);
    *at = strstr(text, stop) - text;
    assert_true(*at > 0);
    return text;
}

static void test_stop(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f->e, NULL, 0);
    char stop[16], body[512];
    long at;
    char *full = story_and_stop(s, stop, sizeof(stop), &at);
    cJSON *sj = cJSON_CreateString(stop);
    char *stop_json = cJSON_PrintUnformatted(sj);
    cJSON_Delete(sj);

    /* not streamed: the text ends right before the stop string */
    snprintf(body, sizeof(body), "{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true, "
             "\"stop\": [\"never in this text\", %s]}", stop_json);
    cJSON *j = post_json(s, "/v1/completions", body, NULL);
    const char *text = str(choice(j, 0), "text");
    assert_int_equal(strlen(text), at);
    assert_memory_equal(text, full, (size_t)at);
    assert_null(strstr(text, stop));
    assert_string_equal(str(choice(j, 0), "finish_reason"), "stop");
    int used = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "usage"), "completion_tokens")->valueint;
    assert_true(used < 32);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(choice(j, 0), "tokens")), used);
    cJSON_Delete(j);

    /* streamed: the same text, the stop string never sent, not even its start */
    snprintf(body, sizeof(body), "{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true, "
             "\"stop\": %s, \"stream\": true}", stop_json);
    resp r = post(s, "/v1/completions", body);
    char *texts[1] = {strdup("")}, fin[1][16] = {""};
    int role_first;
    read_stream(r.body, "text_completion", texts, fin, 1, &role_first);
    assert_int_equal(strlen(texts[0]), at);
    assert_memory_equal(texts[0], full, (size_t)at);
    assert_string_equal(fin[0], "stop");
    free(texts[0]);
    resp_free(&r);

    /* a stop id: the third token ends the choice; its text is left out */
    j = post_json(s, "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true}",
                  NULL);
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(choice(j, 0), "tokens");
    int third = cJSON_GetArrayItem(toks, 2)->valueint, k = 0;
    while (cJSON_GetArrayItem(toks, k)->valueint != third) k++;    /* its first occurrence */
    cJSON_Delete(j);
    snprintf(body, sizeof(body), "{\"prompt\": \"Once upon a time\", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true, "
             "\"stop_token_ids\": [%d]}", third);
    j = post_json(s, "/v1/completions", body, NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(choice(j, 0), "tokens")), k + 1);
    assert_string_equal(str(choice(j, 0), "finish_reason"), "stop");
    text = str(choice(j, 0), "text");
    assert_true(strlen(text) < strlen(full));
    assert_memory_equal(text, full, strlen(text));
    cJSON_Delete(j);

    /* chat honours stop the same way */
    snprintf(body, sizeof(body), "{" STORY ", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true, \"stop\": \"a\"}");
    j = post_json(s, "/v1/chat/completions", body, NULL);
    assert_null(strchr(str(cJSON_GetObjectItemCaseSensitive(choice(j, 0), "message"), "content"), 'a'));
    assert_string_equal(str(choice(j, 0), "finish_reason"), "stop");
    cJSON_Delete(j);
    free(stop_json);
    free(full);
    hs_stop(s);
}

static void test_n(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f->e, NULL, 0);
    /* greedy: two choices, each its own sequence, the same text */
    cJSON *j = post_json(s, "/v1/chat/completions", "{" STORY ", \"max_tokens\": 16, \"temperature\": 0, \"n\": 2, \"ignore_eos\": true}",
                         NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "choices")), 2);
    for (int i = 0; i < 2; i++) assert_int_equal(cJSON_GetObjectItemCaseSensitive(choice(j, i), "index")->valueint, i);
    assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(choice(j, 0), "message"), "content"),
                        str(cJSON_GetObjectItemCaseSensitive(choice(j, 1), "message"), "content"));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "usage"), "completion_tokens")->valueint, 32);
    cJSON_Delete(j);

    /* sampled: the choices differ, and the seed repeats them */
    const char *sampled = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 1, \"seed\": 7, \"n\": 3, "
                          "\"ignore_eos\": true}";
    cJSON *a = post_json(s, "/v1/completions", sampled, NULL), *b = post_json(s, "/v1/completions", sampled, NULL);
    int differ = 0;
    for (int i = 0; i < 3; i++) {
        assert_string_equal(str(choice(a, i), "text"), str(choice(b, i), "text"));
        differ |= i && strcmp(str(choice(a, i), "text"), str(choice(a, 0), "text"));
    }
    assert_true(differ);
    cJSON_Delete(a);
    cJSON_Delete(b);

    /* streamed: both choices, each to its end */
    resp r = post(s, "/v1/chat/completions", "{" STORY ", \"max_tokens\": 8, \"temperature\": 0, \"n\": 2, \"ignore_eos\": true, "
                  "\"stream\": true}");
    char *texts[2] = {strdup(""), strdup("")}, fin[2][16] = {"", ""};
    int role_first;
    assert_int_equal(read_stream(r.body, "chat.completion.chunk", texts, fin, 2, &role_first), 2 + 16);
    assert_string_equal(texts[0], texts[1]);
    assert_true(strlen(texts[0]) > 0);
    assert_string_equal(fin[0], "length");
    assert_string_equal(fin[1], "length");
    free(texts[0]);
    free(texts[1]);
    resp_free(&r);
    hs_stop(s);
}

/* POST body to path expecting 400 whose message holds needle. */
static void expect_400(hs_server *s, const char *path, const char *body, const char *needle) {
    resp r = post(s, path, body);
    cJSON *j = cJSON_Parse(r.body);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message");
    if (r.status != 400 || !cJSON_IsString(m) || !strstr(m->valuestring, needle))
        fail_msg("POST %s %s: %ld %s, want 400 with \"%s\"", path, body, r.status, r.body, needle);
    cJSON_Delete(j);
    resp_free(&r);
}

static void test_strict(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f->e, NULL, 0);
    const char *c = "/v1/completions", *ch = "/v1/chat/completions";
    expect_400(s, c, "{\"prompt\": \"Once\", \"foo\": 1}", "foo: unknown field for POST /v1/completions");
    expect_400(s, ch, "{" STORY ", \"tools\": []}", "tools: unknown field for POST /v1/chat/completions");
    expect_400(s, ch, "{" STORY ", \"prompt\": \"x\"}", "prompt: unknown field");
    expect_400(s, c, "{\"prompt\": \"Once\", \"n\": 100}", "n: expected a whole number from 1 to 8");
    expect_400(s, ch, "{" STORY ", \"n\": 0}", "n: expected a whole number from 1 to 8");
    expect_400(s, c, "{\"prompt\": \"Once\", \"logprobs\": 5}", "logprobs: not supported");
    expect_400(s, ch, "{" STORY ", \"logprobs\": true}", "logprobs: not supported");
    expect_400(s, ch, "{" STORY ", \"presence_penalty\": 0.5}", "presence_penalty: not supported");
    expect_400(s, c, "{\"prompt\": \"Once\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop: expected a string or a list of 1 to 4");
    expect_400(s, c, "{\"prompt\": \"Once\", \"stop\": [\"a\", 3]}", "stop[1]: expected a string");
    expect_400(s, c, "{\"prompt\": \"Once\", \"stop_token_ids\": [600]}", "stop_token_ids[0]: expected a token id from 0 to 511");
    expect_400(s, ch, "{\"messages\": []}", "messages: expected a list of at least one");
    expect_400(s, ch, "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "messages[0].role: expected");
    expect_400(s, ch, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages[0].content[0]");
    expect_400(s, ch, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}", "messages[0].tool_calls: unknown");
    /* known and not done, asking nothing: accepted, and named */
    resp r;
    cJSON *j = post_json(s, ch, "{" STORY ", \"max_tokens\": 2, \"user\": \"u1\", \"logprobs\": false, \"frequency_penalty\": 0, "
                         "\"response_format\": {\"type\": \"text\"}, \"max_completion_tokens\": 3}", &r);
    char h[256];
    assert_string_equal(header(&r, "X-Bench-Ignored-Fields", h, sizeof(h)), "user, logprobs, frequency_penalty, response_format");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "usage"), "completion_tokens")->valueint, 3);
    cJSON_Delete(j);
    resp_free(&r);
    hs_stop(s);

    /* --lenient: unknown fields taken and named */
    s = start(f->e, NULL, 1);
    j = post_json(s, c, "{\"prompt\": \"Once\", \"max_tokens\": 2, \"foo\": 1, \"mirostat\": 2}", &r);
    assert_string_equal(header(&r, "X-Bench-Ignored-Fields", h, sizeof(h)), "foo, mirostat");
    cJSON_Delete(j);
    resp_free(&r);
    expect_400(s, c, "{\"prompt\": \"Once\", \"n\": 9}", "n: expected");    /* lenient on names, not values */
    hs_stop(s);
}

/* ======================================================================
 * A GGUF with tokenizer.chat_template
 * ====================================================================== */

typedef struct copy_ctx {
    const model *m;
    int fd;
} copy_ctx;

static int copy_fill(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    const copy_ctx *c = user;
    const model_tensor *t = &c->m->tensors[i];
    if (nbytes != t->nbytes || pread(c->fd, dst, nbytes, (off_t)t->offset) != (ssize_t)nbytes) {
        snprintf(err, errlen, "%s: cannot read tensor %s", c->m->files[t->file], t->name);
        return -1;
    }
    return 0;
}

/* stories260K and tok512 as a GGUF whose template is jinja, with ids 510 and 511 made the
 * control tokens <|im_start|> and <|im_end|> (pieces the story model never needs). */
static void write_gguf(fx *f, const char *path, const char *jinja) {
    model *m = NULL;
    char err[512];
    if (model_open(f->model, f->tok, &m, err, sizeof(err))) fail_msg("model_open: %s", err);
    assert_int_equal(m->n_files, 1);
    free(m->vocab.tokens[510]);
    free(m->vocab.tokens[511]);
    m->vocab.tokens[510] = strdup("<|im_start|>");
    m->vocab.tokens[511] = strdup("<|im_end|>");
    m->vocab.types[510] = m->vocab.types[511] = TOKEN_CONTROL;
    m->vocab.chat_template = strdup(jinja);
    copy_ctx c = {.m = m, .fd = open(m->files[0], O_RDONLY | O_CLOEXEC)};
    assert_true(c.fd >= 0);
    model_config cfg = m->cfg;
    cfg.seq_len = cfg.seq_len_header > 0 ? cfg.seq_len_header : cfg.seq_len;
    model_write_src src = {.name = "stories-chat", .cfg = &cfg, .vocab = &m->vocab, .n_tensors = m->n_tensors, .tensors = m->tensors,
                           .fill = copy_fill, .user = &c};
    if (gguf_write(path, &src, err, sizeof(err))) fail_msg("gguf_write: %s", err);
    close(c.fd);
    model_free(m);
}

static void test_gguf_template(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    char path[600], unknown[600];
    snprintf(path, sizeof(path), "%s/chatml.gguf", f->tmp);
    snprintf(unknown, sizeof(unknown), "%s/gemma.gguf", f->tmp);
    write_gguf(f, path, "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n'}}"
               "{% endfor %}");
    write_gguf(f, unknown, "{{ '<start_of_turn>' + message['role'] + '\\n' + message['content'] + '<end_of_turn>\\n' }}");
    engine_spec es = {.model_path = path, .threads = 1, .max_seqs = 2, .module_dir = tu_module_dir()};
    engine *e = NULL, *eu = NULL;
    char err[512];
    if (engine_create(&es, &e, err, sizeof(err))) fail_msg("engine_create: %s", err);
    es.model_path = unknown;
    if (engine_create(&es, &eu, err, sizeof(err))) fail_msg("engine_create: %s", err);
    assert_non_null(strstr(engine_model(e)->vocab.chat_template, "<|im_start|>"));    /* the GGUF round trip */

    /* chatml recognised; its markers are the ids 510, 511, the text between through the
     * tokenizer; no BOS (ChatML has none): the completion of exactly those ids answers the same */
    hs_server *s = start(e, NULL, 0);
    resp r;
    cJSON *j = post_json(s, "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 12, "
                         "\"temperature\": 0, \"ignore_eos\": true}", &r);
    char h[256];
    assert_string_equal(header(&r, "X-Bench-Chat-Template", h, sizeof(h)), "chatml (recognised in the model's tokenizer.chat_template)");
    resp_free(&r);
    char *chat_text = strdup(str(cJSON_GetObjectItemCaseSensitive(choice(j, 0), "message"), "content"));
    cJSON_Delete(j);
    const tokenizer *tok = engine_tokenizer(e);
    int ids[64], n = 0;
    const char *segs[] = {"user\nHi", "\n", "assistant\n"};
    int marks[] = {510, 511, 510};
    for (int i = 0; i < 3; i++) {
        ids[n++] = marks[i];
        int k = tokenizer_encode(tok, segs[i], 0, 0, ids + n, 64 - n, err, sizeof(err));
        assert_true(k > 0);
        n += k;
    }
    char body[1024];
    int at = snprintf(body, sizeof(body), "{\"prompt\": [");
    for (int i = 0; i < n; i++) at += snprintf(body + at, sizeof(body) - (size_t)at, "%s%d", i ? ", " : "", ids[i]);
    snprintf(body + at, sizeof(body) - (size_t)at, "], \"max_tokens\": 12, \"temperature\": 0, \"ignore_eos\": true}");
    j = post_json(s, "/v1/completions", body, NULL);
    assert_string_equal(str(choice(j, 0), "text"), chat_text);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "usage"), "prompt_tokens")->valueint, n);
    cJSON_Delete(j);
    free(chat_text);
    hs_stop(s);

    /* a template bench does not know: chat refused naming the way out, completions served */
    s = start(eu, NULL, 0);
    expect_400(s, "/v1/chat/completions", "{" STORY "}", "--chat-template NAME");
    j = post_json(s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 2}", NULL);
    cJSON_Delete(j);
    hs_stop(s);
    /* ... until one is named */
    s = start(eu, "zephyr", 0);
    j = post_json(s, "/v1/chat/completions", "{" STORY ", \"max_tokens\": 2}", &r);
    assert_string_equal(header(&r, "X-Bench-Chat-Template", h, sizeof(h)), "zephyr (named by --chat-template)");
    resp_free(&r);
    cJSON_Delete(j);
    hs_stop(s);
    hs_opts o = {.chat_template = "vicuna"};
    assert_int_equal(hs_start(eu, &o, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "chat template \"vicuna\": expected one of llama-2, chatml"));
    engine_destroy(e);
    engine_destroy(eu);
}

/* ======================================================================
 * The openai npm package against `bench serve`
 * ====================================================================== */

static int run_argv(char *const argv[], const char *out_path, pid_t *pid_out) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_path) {
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return -1;
    if (pid_out) {
        *pid_out = pid;
        return 0;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* node on the PATH into buf; NULL when there is none. */
static const char *find_node(char *buf, size_t len) {
    const char *path = getenv("PATH");
    for (const char *p = path; p && *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, len, "%.*s/node", (int)n, p);
        if (n && !access(buf, X_OK)) return buf;
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

static void test_openai_client(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    char node[512], port_file[600], log[600], srv_log[600], cwd[512], mods[700];
    if (!find_node(node, sizeof(node))) {
        fprintf(stderr, "skip: node is not on the PATH (the openai npm client test needs Node.js)\n");
        skip();
    }
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    const char *nm = getenv("BENCH_NODE_MODULES");
    snprintf(mods, sizeof(mods), "%s", nm ? nm : "build/node_modules");
    char pkg[800];
    snprintf(pkg, sizeof(pkg), "%s/openai/package.json", mods);
    if (access(pkg, R_OK)) {
        fprintf(stderr, "skip: %s is missing: `make openai-client` installs the openai npm package (needs the npm registry)\n", pkg);
        skip();
    }
    const char *bench = getenv("BENCH_BIN");
    assert_non_null(bench);
    snprintf(port_file, sizeof(port_file), "%s/port", f->tmp);
    snprintf(log, sizeof(log), "%s/client.log", f->tmp);
    snprintf(srv_log, sizeof(srv_log), "%s/serve.log", f->tmp);
    char *srv[] = {(char *)bench, "serve", "--model", f->model, "--tokenizer", f->tok, "--port", "0", "--port-file", port_file,
                   "--threads", "1", "--name", "stories", NULL};
    pid_t pid;
    assert_int_equal(run_argv(srv, srv_log, &pid), 0);
    int port = 0;
    for (int i = 0; i < 600 && !port; i++) {     /* up to a minute under the sanitizers */
        FILE *p = fopen(port_file, "r");
        if (p) {
            if (fscanf(p, "%d", &port) != 1) port = 0;
            fclose(p);
        }
        if (!port) {
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
        }
    }
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", port);
    char script[600];
    snprintf(script, sizeof(script), "%s/tests/openai/client.mjs", cwd);
    char *cli[] = {node, script, url, mods, NULL};
    int rc = port ? run_argv(cli, log, NULL) : -1;
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    FILE *l = fopen(log, "r");
    char line[1024];
    while (l && fgets(line, sizeof(line), l)) fprintf(stderr, "client.mjs: %s", line);
    if (l) fclose(l);
    if (!port) fail_msg("bench serve never wrote its port (see %s)", srv_log);
    assert_int_equal(rc, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template_detect),
        cmocka_unit_test(test_template_render),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_n),
        cmocka_unit_test(test_strict),
        cmocka_unit_test(test_gguf_template),
        cmocka_unit_test(test_openai_client),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
