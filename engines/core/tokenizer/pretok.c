/* Pre-tokenization: the families' split rules and a small regex matcher (see pretok.h).
 *
 * The matcher compiles a pattern to a program and runs it as a Pike VM (Thompson's
 * NFA simulation with threads kept in priority order), which gives the same match as
 * a backtracking engine's leftmost-first, greedy semantics (Perl, ECMAScript, Rust's
 * regex). One search is linear in the text it scans, never exponential; but a search
 * restarted after each match may rescan (a*b|a on aaaa... scans to the end for each
 * one-letter match), so the code points scanned per text are counted and bounded
 * (PT_STEPS_*): such a pattern fails with an error instead of going quadratic. The
 * parser and compiler bound nesting, nodes and the copies {m,n} makes. Program:
 *   OP_CLASS c      consume one code point in class c
 *   OP_SPLIT x y    continue at x, and at y with lower priority
 *   OP_JMP x
 *   OP_NOTAHEAD c   (?!c): the next code point is absent or outside c; consumes nothing
 *   OP_END          $: at the end of the piece
 *   OP_MATCH
 */
#include "pretok.h"
#include "unicode.h"
#include "engines/abi/module.h"
#include "util/ut_vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PT_MAX_PROG 8192 /* instructions per pattern: {m,n} copies its atom, so bound it */
#define PT_MAX_PATTERNS 16
#define PT_MAX_DEPTH 64 /* groups nested in groups: the parser and the compiler recurse per level */
#define PT_MAX_NODES 32768 /* parsed atoms, groups and alternatives per pattern */
#define PT_MAX_GEN 65536 /* nodes compiled per pattern, counting each copy {m,n} makes: an
                          * atom that emits nothing (an empty group) is copied for free */
/* Matching work per pattern and text, counted in code points scanned: a search from a
 * position runs until every thread that could still beat the match found has died, so
 * leftmost-first matching restarted after each match is quadratic for patterns whose
 * higher-priority alternative scans far and fails (a*b|a on aaaa...). Real patterns
 * scan a code point or two past their match; past this budget the split fails. */
#define PT_STEPS_PER_CP 64
#define PT_STEPS_BASE (1u << 20)

/* ---- the families ---- */

/* Patterns as llama.cpp's llm_tokenizer_bpe lists them per tokenizer.ggml.pre, which
 * are the HF tokenizer.json Split patterns of each model family (Llama 3's and Qwen2's
 * case-insensitive contractions written (?i:...) as in their tokenizer.json). */
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const re_gpt2[] = {GPT2_RE, NULL};
static const char *const re_starcoder[] = {"\\p{N}", GPT2_RE, NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]", NULL};
/* Code points written \x{...}: an editor or a copy that normalizes text (NFC) would
 * silently change several of them (U+1F7D, U+1FBE, U+2126, U+212A are singletons). */
static const char *const re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
    "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-"
    "\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-"
    "\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
    "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-"
    "\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
    NULL};
static const char *const re_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}", NULL};
static const char *const re_llama3[] = {LLAMA3_RE, NULL};
static const char *const re_qwen2[] = {QWEN2_RE, NULL};
/* llama.cpp's rules for a BPE vocabulary whose pre is "default" */
static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]", NULL};

static const struct family {
    const char *name;
    const char *const *patterns;
    int tested;         /* checked against llama.cpp's test set with its vocabulary file */
    int ignore_merges;  /* a word that is itself a token is not merged (Llama 3) */
} families[] = {
    {"gpt-2", re_gpt2, 1, 0},
    {"mpt", re_gpt2, 1, 0},
    {"starcoder", re_starcoder, 1, 0},
    {"refact", re_starcoder, 1, 0},
    {"falcon", re_falcon, 1, 0},
    {"deepseek-llm", re_deepseek_llm, 1, 0},
    {"deepseek-coder", re_deepseek_coder, 1, 0},
    {"llama-bpe", re_llama3, 0, 1},
    {"llama3", re_llama3, 0, 1},
    {"qwen2", re_qwen2, 0, 0},
    {"default", re_default, 0, 0},
};
#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

static const struct family *find_family(const char *name) {
    for (size_t i = 0; name && i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name)) return &families[i];
    return NULL;
}

const char *pretok_names(void) {
    return "gpt-2, mpt, starcoder, refact, falcon, deepseek-llm, deepseek-coder, llama-bpe, llama3, qwen2, default";
}

int pretok_name_known(const char *name) { return find_family(name) != NULL; }

int pretok_name_tested(const char *name) {
    const struct family *f = find_family(name);
    return f && f->tested;
}

int pretok_name_ignores_merges(const char *name) {
    const struct family *f = find_family(name);
    return f && f->ignore_merges;
}

/* ---- compiled form ---- */

typedef struct { uint32_t lo, hi; } cp_range;

typedef struct {
    int negate;
    uint32_t cats;      /* 1 << UCAT_x: \p{X} */
    uint32_t notcats;   /* 1 << UCAT_x: \P{X} */
    int space, nonspace;/* \s, \S */
    cp_range *r;        /* (nr) literal code points and ranges */
    int nr, capr;
} cclass;

enum { OP_CLASS, OP_SPLIT, OP_JMP, OP_NOTAHEAD, OP_END, OP_MATCH };

typedef struct {
    uint8_t op;
    int x, y;           /* jump targets, or x = class index */
} inst;

typedef struct {
    inst *code;
    int n;
    cclass *cls;        /* (ncls, capacity capcls) */
    int ncls, capcls;
    char *src;          /* the pattern, for messages */
} prog;

struct pretok {
    prog p[PT_MAX_PATTERNS];
    int n;
};

static int class_match(const cclass *c, uint32_t cp) {
    /* ranges are sorted and disjoint (normalize_class): binary search */
    int lo = 0, hi = c->nr, in = 0;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cp < c->r[mid].lo) hi = mid;
        else if (cp > c->r[mid].hi) lo = mid + 1;
        else { in = 1; break; }
    }
    if (!in && (c->cats | c->notcats)) {
        uint32_t b = 1u << unicode_class(cp);
        in = (c->cats & b) || (c->notcats & ~b);
    }
    if (!in && (c->space | c->nonspace)) in = unicode_is_space(cp) ? c->space : c->nonspace;
    return in ^ c->negate;
}

static void prog_free(prog *p) {
    for (int i = 0; i < p->ncls; i++) free(p->cls[i].r);
    free(p->cls);
    free(p->code);
    free(p->src);
    memset(p, 0, sizeof(*p));
}

void pretok_free(pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) prog_free(&p->p[i]);
    free(p);
}

/* ---- parsing: pattern -> tree ---- */

enum { N_CLASS, N_CAT, N_ALT, N_REP, N_NOTAHEAD, N_END };

typedef struct node {
    int kind;
    int cls;                /* N_CLASS, N_NOTAHEAD */
    int min, max;           /* N_REP; max -1: unbounded */
    struct node **kid;      /* (nk, capacity capk) N_CAT, N_ALT, N_REP (one) */
    int nk, capk;
} node;

typedef struct {
    const char *pat;
    uint32_t *cp;           /* (n) the pattern's code points */
    size_t *at;             /* (n) their byte offsets, for messages */
    size_t n, i;
    int ci;                 /* inside (?i:...) */
    int depth;              /* groups open at ps->i */
    int nodes;              /* nodes made (PT_MAX_NODES) */
    int gens;               /* nodes compiled, copies included (PT_MAX_GEN) */
    prog *p;
    char *err;
    size_t errlen;
    int failed;
} parser;

static void node_free(node *nd) {
    if (!nd) return;
    for (int i = 0; i < nd->nk; i++) node_free(nd->kid[i]);
    free(nd->kid);
    free(nd);
}

static int perr(parser *ps, const char *what) {
    if (!ps->failed)
        bench_errf(ps->err, ps->errlen, "pre-tokenizer pattern \"%.80s\": byte %zu: %s", ps->pat,
                   ps->i < ps->n ? ps->at[ps->i] : strlen(ps->pat), what);
    ps->failed = 1;
    return -1;
}

static node *new_node(parser *ps, int kind) {
    if (++ps->nodes > PT_MAX_NODES) {
        char what[96];
        snprintf(what, sizeof(what), "more than %d atoms, groups and alternatives", PT_MAX_NODES);
        perr(ps, what);
        return NULL;
    }
    node *nd = calloc(1, sizeof(*nd));
    if (!nd) perr(ps, "out of memory");
    else nd->kind = kind;
    return nd;
}

static int add_kid(parser *ps, node *nd, node *k) {
    if (UT_VEC_RESERVE(nd->kid, nd->capk, nd->nk + 1)) {
        node_free(k);
        return perr(ps, "out of memory");
    }
    nd->kid[nd->nk++] = k;
    return 0;
}

static int new_class(parser *ps) {
    /* grown by doubling: a realloc per class copied the array every time, quadratic in a
     * pattern's literals (32k alternatives of one literal each: minutes under ASan, whose
     * realloc always moves) */
    prog *p = ps->p;
    if (UT_VEC_RESERVE(p->cls, p->capcls, p->ncls + 1)) return perr(ps, "out of memory");
    memset(&p->cls[p->ncls], 0, sizeof(*p->cls));
    return p->ncls++;
}

static int add_range1(parser *ps, cclass *c, uint32_t lo, uint32_t hi) {
    if (UT_VEC_RESERVE(c->r, c->capr, c->nr + 1)) return perr(ps, "out of memory");
    c->r[c->nr++] = (cp_range){lo, hi};
    return 0;
}

/* A range, with its other ASCII case too inside (?i:...). */
static int add_range(parser *ps, cclass *c, uint32_t lo, uint32_t hi) {
    if (add_range1(ps, c, lo, hi)) return -1;
    if (!ps->ci) return 0;
    uint32_t a = lo > 'a' ? lo : 'a', b = hi < 'z' ? hi : 'z';
    if (a <= b && add_range1(ps, c, a - 32, b - 32)) return -1;
    a = lo > 'A' ? lo : 'A', b = hi < 'Z' ? hi : 'Z';
    if (a <= b && add_range1(ps, c, a + 32, b + 32)) return -1;
    return 0;
}

static int hexval(uint32_t c) {
    return c >= '0' && c <= '9' ? (int)(c - '0') : c >= 'a' && c <= 'f' ? (int)(c - 'a' + 10) : c >= 'A' && c <= 'F' ? (int)(c - 'A' + 10) : -1;
}

/* After a backslash. Returns 1 with *cp for a single code point, 0 when a set was
 * added to class ci, -1 on error. */
static int parse_escape(parser *ps, int ci, uint32_t *cp) {
    if (ps->i >= ps->n) return perr(ps, "pattern ends in a backslash");
    uint32_t c = ps->cp[ps->i++];
    cclass *k = &ps->p->cls[ci];
    switch (c) {
    case 's': k->space = 1; return 0;
    case 'S': k->nonspace = 1; return 0;
    case 'r': *cp = '\r'; return 1;
    case 'n': *cp = '\n'; return 1;
    case 't': *cp = '\t'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'v': *cp = '\v'; return 1;
    case 'p':
    case 'P': {
        static const char letters[] = " LMNPSZC"; /* index = UCAT_x */
        uint32_t x;
        if (ps->i + 2 < ps->n && ps->cp[ps->i] == '{' && ps->cp[ps->i + 2] == '}') x = ps->cp[ps->i + 1], ps->i += 3;
        else if (ps->i < ps->n && ps->cp[ps->i] != '{') x = ps->cp[ps->i++];
        else return perr(ps, "\\p{...}: only the one-letter classes L M N P S Z C are supported");
        const char *f = x < 128 && x != ' ' ? strchr(letters, (int)x) : NULL;
        if (!f || !*f) return perr(ps, "\\p{...}: only the one-letter classes L M N P S Z C are supported");
        if (c == 'p') k->cats |= 1u << (f - letters);
        else k->notcats |= 1u << (f - letters);
        return 0;
    }
    case 'x': {
        uint32_t v = 0;
        int digits = 0;
        if (ps->i < ps->n && ps->cp[ps->i] == '{') {
            for (ps->i++; ps->i < ps->n && ps->cp[ps->i] != '}'; ps->i++, digits++) {
                int h = hexval(ps->cp[ps->i]);
                if (h < 0 || digits >= 6) return perr(ps, "\\x{...}: expected up to 6 hex digits");
                v = v * 16 + (uint32_t)h;
            }
            if (ps->i >= ps->n || digits == 0) return perr(ps, "\\x{...}: unterminated");
            ps->i++;
        } else {
            for (; digits < 2; digits++, ps->i++) {
                int h = ps->i < ps->n ? hexval(ps->cp[ps->i]) : -1;
                if (h < 0) return perr(ps, "\\xHH: expected two hex digits");
                v = v * 16 + (uint32_t)h;
            }
        }
        if (v > 0x10FFFF) return perr(ps, "\\x: code point past U+10FFFF");
        *cp = v;
        return 1;
    }
    default:
        /* an escaped punctuation character stands for itself; letters and digits are
         * classes or references this matcher does not have (\d, \w, \b, \1, ...) */
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            ps->i--;
            return perr(ps, "this escape is not supported (\\s \\S \\p \\P \\r \\n \\t \\f \\v \\x are)");
        }
        *cp = c;
        return 1;
    }
}

static node *class_node(parser *ps, int ci) {
    node *nd = new_node(ps, N_CLASS);
    if (nd) nd->cls = ci;
    return nd;
}

/* After '[': a bracket expression. */
static node *parse_bracket(parser *ps) {
    int ci = new_class(ps);
    if (ci < 0) return NULL;
    if (ps->i < ps->n && ps->cp[ps->i] == '^') ps->p->cls[ci].negate = 1, ps->i++;
    int first = 1;
    for (;;) {
        if (ps->i >= ps->n) return perr(ps, "unterminated [...]"), NULL;
        uint32_t c = ps->cp[ps->i];
        if (c == ']' && !first) {
            ps->i++;
            break;
        }
        first = 0;
        if (c == '[') return perr(ps, "nested [...] is not supported"), NULL;
        if (c == '&' && ps->i + 1 < ps->n && ps->cp[ps->i + 1] == '&') return perr(ps, "&& in [...] is not supported"), NULL;
        uint32_t lo;
        ps->i++;
        if (c == '\\') {
            int r = parse_escape(ps, ci, &lo);
            if (r < 0) return NULL;
            if (r == 0) continue;
        } else
            lo = c;
        uint32_t hi = lo;
        if (ps->i + 1 < ps->n && ps->cp[ps->i] == '-' && ps->cp[ps->i + 1] != ']') {
            ps->i++;
            uint32_t h = ps->cp[ps->i++];
            if (h == '\\') {
                int r = parse_escape(ps, ci, &hi);
                if (r < 0) return NULL;
                if (r == 0) return perr(ps, "a range cannot end in a class"), NULL;
            } else
                hi = h;
            if (hi < lo) return perr(ps, "range out of order"), NULL;
        }
        if (add_range(ps, &ps->p->cls[ci], lo, hi)) return NULL;
    }
    return class_node(ps, ci);
}

static node *parse_alt(parser *ps);

static node *parse_atom(parser *ps) {
    uint32_t c = ps->cp[ps->i++];
    switch (c) {
    case '(': {
        int ci_saved = ps->ci, look = 0;
        if (ps->depth >= PT_MAX_DEPTH) {
            char what[64];
            ps->i--;
            snprintf(what, sizeof(what), "groups nested deeper than %d", PT_MAX_DEPTH);
            return perr(ps, what), NULL;
        }
        if (ps->i + 1 < ps->n && ps->cp[ps->i] == '?') {
            uint32_t k = ps->cp[ps->i + 1];
            if (k == ':') ps->i += 2;
            else if (k == '!') ps->i += 2, look = 1;
            else if (k == 'i' && ps->i + 2 < ps->n && ps->cp[ps->i + 2] == ':') ps->i += 3, ps->ci = 1;
            else return perr(ps, "this group is not supported ((?:...) (?i:...) (?!X) are)"), NULL;
        }
        ps->depth++;
        node *in = parse_alt(ps);
        ps->depth--;
        ps->ci = ci_saved;
        if (!in) return NULL;
        if (ps->i >= ps->n || ps->cp[ps->i] != ')') {
            node_free(in);
            return perr(ps, "missing )"), NULL;
        }
        ps->i++;
        if (!look) return in;
        node *one = in;
        while ((one->kind == N_CAT || one->kind == N_ALT) && one->nk == 1) one = one->kid[0];
        if (one->kind != N_CLASS) {
            node_free(in);
            return perr(ps, "(?!X) is supported for one character or class X only"), NULL;
        }
        one->kind = N_NOTAHEAD;
        if (one != in) {
            node *n2 = new_node(ps, N_NOTAHEAD);
            if (n2) n2->cls = one->cls;
            node_free(in);
            return n2;
        }
        return in;
    }
    case '[':
        return parse_bracket(ps);
    case '.': {
        int ci = new_class(ps);
        if (ci < 0 || add_range1(ps, &ps->p->cls[ci], '\n', '\n')) return NULL;
        ps->p->cls[ci].negate = 1;
        return class_node(ps, ci);
    }
    case '$':
        return new_node(ps, N_END);
    case '*': case '+': case '?': case ')': case '^':
        ps->i--;
        return perr(ps, c == '^' ? "^ is not supported" : "nothing to repeat or unbalanced )"), NULL;
    default: {
        int ci = new_class(ps);
        if (ci < 0) return NULL;
        uint32_t lo = c;
        if (c == '\\') {
            int r = parse_escape(ps, ci, &lo);
            if (r < 0) return NULL;
            if (r == 0) return class_node(ps, ci);
        }
        if (add_range(ps, &ps->p->cls[ci], lo, lo)) return NULL;
        return class_node(ps, ci);
    }
    }
}

static int parse_int(parser *ps, int *v) {
    int d = 0;
    *v = 0;
    while (ps->i < ps->n && ps->cp[ps->i] >= '0' && ps->cp[ps->i] <= '9') {
        if (*v > 100000) return perr(ps, "repetition count too large");
        *v = *v * 10 + (int)(ps->cp[ps->i++] - '0');
        d++;
    }
    return d ? 0 : -1;
}

static node *parse_repeat(parser *ps) {
    node *a = parse_atom(ps);
    if (!a || ps->i >= ps->n) return a;
    uint32_t c = ps->cp[ps->i];
    int min, max;
    if (c == '*') min = 0, max = -1;
    else if (c == '+') min = 1, max = -1;
    else if (c == '?') min = 0, max = 1;
    else if (c == '{' && ps->i + 1 < ps->n && ps->cp[ps->i + 1] >= '0' && ps->cp[ps->i + 1] <= '9') {
        ps->i++;
        if (parse_int(ps, &min)) goto bad;
        max = min;
        if (ps->i < ps->n && ps->cp[ps->i] == ',') {
            ps->i++;
            max = -1;
            if (ps->i < ps->n && ps->cp[ps->i] != '}' && parse_int(ps, &max)) goto bad;
        }
        if (ps->i >= ps->n || ps->cp[ps->i] != '}' || (max >= 0 && max < min)) goto bad;
    } else
        return a;
    ps->i++;
    if (ps->i < ps->n && (ps->cp[ps->i] == '?' || ps->cp[ps->i] == '+')) {
        node_free(a);
        return perr(ps, "lazy and possessive repetitions are not supported"), NULL;
    }
    node *r = new_node(ps, N_REP);
    if (!r) {
        node_free(a);
        return NULL;
    }
    r->min = min;
    r->max = max;
    if (add_kid(ps, r, a)) {
        node_free(r);
        return NULL;
    }
    return r;
bad:
    node_free(a);
    return perr(ps, "malformed {m,n}"), NULL;
}

static node *parse_cat(parser *ps) {
    node *cat = new_node(ps, N_CAT);
    if (!cat) return NULL;
    while (ps->i < ps->n && ps->cp[ps->i] != '|' && ps->cp[ps->i] != ')') {
        node *k = parse_repeat(ps);
        if (!k || add_kid(ps, cat, k)) {
            node_free(cat);
            return NULL;
        }
    }
    return cat;
}

static node *parse_alt(parser *ps) {
    node *alt = new_node(ps, N_ALT);
    if (!alt) return NULL;
    for (;;) {
        node *k = parse_cat(ps);
        if (!k || add_kid(ps, alt, k)) {
            node_free(alt);
            return NULL;
        }
        if (ps->i >= ps->n || ps->cp[ps->i] != '|') break;
        ps->i++;
    }
    return alt;
}

static int cmp_range(const void *a, const void *b) {
    const cp_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorts a class's ranges and merges overlapping or adjacent ones. */
static void normalize_class(cclass *c) {
    if (c->nr < 2) return;
    qsort(c->r, (size_t)c->nr, sizeof(*c->r), cmp_range);
    int w = 0;
    for (int i = 1; i < c->nr; i++) {
        if (c->r[i].lo <= c->r[w].hi + 1) {
            if (c->r[i].hi > c->r[w].hi) c->r[w].hi = c->r[i].hi;
        } else
            c->r[++w] = c->r[i];
    }
    c->nr = w + 1;
}

/* ---- tree -> program ---- */

static int nullable(const node *nd) {
    switch (nd->kind) {
    case N_CLASS: return 0;
    case N_CAT:
        for (int i = 0; i < nd->nk; i++)
            if (!nullable(nd->kid[i])) return 0;
        return 1;
    case N_ALT:
        for (int i = 0; i < nd->nk; i++)
            if (nullable(nd->kid[i])) return 1;
        return 0;
    case N_REP: return nd->min == 0 || nullable(nd->kid[0]);
    default: return 1;
    }
}

static int emit(parser *ps, int op, int x, int y) {
    prog *p = ps->p;
    if (p->n >= PT_MAX_PROG) return perr(ps, "the pattern compiles to too many instructions");
    if (p->n % 256 == 0) {
        inst *c = realloc(p->code, (size_t)(p->n + 256) * sizeof(*c));
        if (!c) return perr(ps, "out of memory");
        p->code = c;
    }
    p->code[p->n] = (inst){.op = (uint8_t)op, .x = x, .y = y};
    return p->n++;
}

static int gen(parser *ps, const node *nd) {
    prog *p = ps->p;
    if (++ps->gens > PT_MAX_GEN) {
        char what[96];
        snprintf(what, sizeof(what), "its repetitions expand to more than %d compiled atoms", PT_MAX_GEN);
        return perr(ps, what);
    }
    switch (nd->kind) {
    case N_CLASS: return emit(ps, OP_CLASS, nd->cls, 0) < 0 ? -1 : 0;
    case N_NOTAHEAD: return emit(ps, OP_NOTAHEAD, nd->cls, 0) < 0 ? -1 : 0;
    case N_END: return emit(ps, OP_END, 0, 0) < 0 ? -1 : 0;
    case N_CAT:
        for (int i = 0; i < nd->nk; i++)
            if (gen(ps, nd->kid[i])) return -1;
        return 0;
    case N_ALT: {
        if (nd->nk == 1) return gen(ps, nd->kid[0]);
        /* each alternative but the last ends in a JMP to the end; until the end is
         * known the JMPs are a chain, each one's x the previous one's index (-1: none) */
        int last_jmp = -1;
        for (int i = 0; i < nd->nk; i++) {
            int split = -1;
            if (i + 1 < nd->nk && (split = emit(ps, OP_SPLIT, 0, 0)) < 0) return -1;
            if (split >= 0) p->code[split].x = p->n;
            if (gen(ps, nd->kid[i])) return -1;
            if (i + 1 < nd->nk) {
                int j = emit(ps, OP_JMP, last_jmp, 0);
                if (j < 0) return -1;
                last_jmp = j;
                p->code[split].y = p->n;
            }
        }
        while (last_jmp >= 0) {
            int prev = p->code[last_jmp].x;
            p->code[last_jmp].x = p->n;
            last_jmp = prev;
        }
        return 0;
    }
    case N_REP: {
        const node *a = nd->kid[0];
        if (nd->max < 0 && nullable(a)) return perr(ps, "an unbounded repetition of something that can match empty");
        for (int i = 0; i < nd->min; i++)
            if (gen(ps, a)) return -1;
        if (nd->max < 0) {
            int split = emit(ps, OP_SPLIT, 0, 0);
            if (split < 0) return -1;
            p->code[split].x = p->n;
            if (gen(ps, a) || emit(ps, OP_JMP, split, 0) < 0) return -1;
            p->code[split].y = p->n;
            return 0;
        }
        /* optional copies: each SPLIT either goes on or leaves the whole repetition */
        int first = p->n;
        for (int i = nd->min; i < nd->max; i++) {
            int split = emit(ps, OP_SPLIT, 0, 0);
            if (split < 0) return -1;
            p->code[split].x = p->n;
            if (gen(ps, a)) return -1;
        }
        /* y == 0 marks this repetition's own SPLITs: nested ones were patched when their
         * atom was generated, and no forward jump can target instruction 0 */
        for (int k = first; k < p->n; k++)
            if (p->code[k].op == OP_SPLIT && p->code[k].y == 0) p->code[k].y = p->n;
        return 0;
    }
    }
    return perr(ps, "internal: unknown node");
}

static int compile(const char *pat, prog *p, char *err, size_t errlen) {
    memset(p, 0, sizeof(*p));
    size_t bl = strlen(pat);
    parser ps = {.pat = pat, .p = p, .err = err, .errlen = errlen};
    ps.cp = malloc((bl + 1) * sizeof(*ps.cp));
    ps.at = malloc((bl + 1) * sizeof(*ps.at));
    node *root = NULL;
    int rc = -1;
    if (!ps.cp || !ps.at) {
        perr(&ps, "out of memory");
        goto out;
    }
    for (size_t b = 0, len; b < bl; b += len) {
        ps.at[ps.n] = b;
        ps.cp[ps.n++] = unicode_decode(pat + b, bl - b, &len);
    }
    if (!(root = parse_alt(&ps))) goto out;
    if (ps.i < ps.n) {
        perr(&ps, "unbalanced )");
        goto out;
    }
    if (gen(&ps, root) || emit(&ps, OP_MATCH, 0, 0) < 0) goto out;
    for (int i = 0; i < p->ncls; i++) normalize_class(&p->cls[i]);
    if (!(p->src = strdup(pat))) {
        perr(&ps, "out of memory");
        goto out;
    }
    rc = 0;
out:
    node_free(root);
    free(ps.cp);
    free(ps.at);
    if (rc) prog_free(p);
    return rc;
}

int pretok_create(const char *const *patterns, int n, pretok **out, char *err, size_t errlen) {
    *out = NULL;
    if (n < 1 || n > PT_MAX_PATTERNS)
        return bench_errf(err, errlen, "pre-tokenizer: %d patterns, expected 1..%d", n, PT_MAX_PATTERNS);
    pretok *p = calloc(1, sizeof(*p));
    if (!p) return bench_errf(err, errlen, "pre-tokenizer: out of memory");
    for (int i = 0; i < n; i++) {
        if (compile(patterns[i], &p->p[i], err, errlen)) {
            pretok_free(p);
            return -1;
        }
        p->n++;
    }
    *out = p;
    return 0;
}

int pretok_create_named(const char *name, pretok **out, char *err, size_t errlen) {
    *out = NULL;
    const struct family *f = find_family(name);
    if (!f)
        return bench_errf(err, errlen, "pre-tokenizer \"%s\" is not known; known: %s", name ? name : "(none)", pretok_names());
    int n = 0;
    while (f->patterns[n]) n++;
    return pretok_create(f->patterns, n, out, err, errlen);
}

/* ---- matching ---- */

typedef struct {
    int *pc;            /* (prog n) threads in priority order */
    size_t *start;      /* (prog n) where each thread's match began */
    int n;
} tlist;

typedef struct {
    const prog *p;
    const uint32_t *cps;
    size_t end;         /* the piece's end: $ and (?!) see it as the end of text */
    unsigned *mark;     /* (prog n) generation an instruction was last added in */
    unsigned gen;
    size_t steps;       /* code points scanned by the searches of this program on this text */
    size_t budget;      /* the most steps allowed (PT_STEPS_*) */
} vm;

/* Adds the thread at pc (following jumps and splits in priority order) for position i. */
static void addthread(vm *m, tlist *l, int pc, size_t i, size_t start) {
    if (m->mark[pc] == m->gen) return;
    m->mark[pc] = m->gen;
    const inst *in = &m->p->code[pc];
    switch (in->op) {
    case OP_JMP: addthread(m, l, in->x, i, start); return;
    case OP_SPLIT:
        addthread(m, l, in->x, i, start);
        addthread(m, l, in->y, i, start);
        return;
    case OP_NOTAHEAD:
        if (i < m->end && class_match(&m->p->cls[in->x], m->cps[i])) return;
        addthread(m, l, pc + 1, i, start);
        return;
    case OP_END:
        if (i == m->end) addthread(m, l, pc + 1, i, start);
        return;
    default:
        l->pc[l->n] = pc;
        l->start[l->n] = start;
        l->n++;
    }
}

/* A fresh generation; on wrap-around the marks are cleared so an old one cannot match. */
static void next_gen(vm *m) {
    if (++m->gen == 0) {
        memset(m->mark, 0, (size_t)(m->p->n + 1) * sizeof(*m->mark));
        m->gen = 1;
    }
}

/* Leftmost-first match in [from, end): 1 with [*ms, *me), 0 when there is none, -1
 * when the budget of steps is spent. */
static int search(vm *m, tlist *cl, tlist *nl, size_t from, size_t *ms, size_t *me) {
    int found = 0;
    cl->n = 0;
    next_gen(m); /* the generation cl is built under */
    for (size_t i = from;; i++) {
        if (++m->steps > m->budget) return -1;
        /* a new thread at each position, below every older one, until a match is found;
         * the marks of this generation keep it from duplicating a thread cl holds */
        if (!found) addthread(m, cl, 0, i, i);
        if (cl->n == 0) break;
        next_gen(m);
        nl->n = 0;
        for (int k = 0; k < cl->n; k++) {
            const inst *in = &m->p->code[cl->pc[k]];
            if (in->op == OP_MATCH) {
                found = 1;
                *ms = cl->start[k];
                *me = i;
                break; /* lower-priority threads lose to this match */
            }
            if (i < m->end && class_match(&m->p->cls[in->x], m->cps[i]))
                addthread(m, nl, cl->pc[k] + 1, i + 1, cl->start[k]);
        }
        tlist t = *cl;
        *cl = *nl;
        *nl = t;
        if (i >= m->end) break; /* nothing consumes past the end */
    }
    return found;
}

static int push_len(size_t **v, size_t *n, size_t *cap, size_t len) {
    if (UT_VEC_RESERVE(*v, *cap, *n + 1)) return -1;
    (*v)[(*n)++] = len;
    return 0;
}

int pretok_split(const pretok *p, const uint32_t *cps, size_t n, size_t **lens, size_t *n_pieces,
                 char *err, size_t errlen) {
    size_t *cur = NULL, ncur = 0, capcur = 0, *nxt = NULL, nnxt = 0, capnxt = 0;
    int maxprog = 0, rc = -1;
    for (int k = 0; k < p->n; k++) maxprog = p->p[k].n > maxprog ? p->p[k].n : maxprog;
    size_t np = (size_t)maxprog + 1;
    tlist a = {0}, b = {0};
    vm m = {0};
    a.pc = malloc(np * sizeof(int));
    b.pc = malloc(np * sizeof(int));
    a.start = malloc(np * sizeof(size_t));
    b.start = malloc(np * sizeof(size_t));
    m.mark = calloc(np, sizeof(unsigned));
    if (!a.pc || !b.pc || !a.start || !b.start || !m.mark) goto oom;
    if (n && push_len(&cur, &ncur, &capcur, n)) goto oom;
    for (int k = 0; k < p->n; k++) {
        m.p = &p->p[k];
        memset(m.mark, 0, np * sizeof(*m.mark)); /* marks are per program */
        m.gen = 0;
        m.steps = 0;
        m.budget = PT_STEPS_BASE + (n < (SIZE_MAX - PT_STEPS_BASE) / PT_STEPS_PER_CP ? n * PT_STEPS_PER_CP : SIZE_MAX - PT_STEPS_BASE);
        nnxt = 0;
        size_t base = 0;
        for (size_t s = 0; s < ncur; s++) {
            size_t seg_end = base + cur[s], pos = base, ms = 0, me = 0;
            m.cps = cps;
            m.end = seg_end;
            while (pos < seg_end) {
                size_t from = pos;
                int f;
                /* an empty match splits nothing: look again one code point on */
                while ((f = search(&m, &a, &b, from, &ms, &me)) > 0 && me == ms && ms < seg_end) from = ms + 1;
                if (f < 0) {
                    bench_errf(err, errlen, "pre-tokenizer pattern \"%.80s\": matching %zu code points took more than %zu steps "
                               "(%d per code point): the pattern rescans the text after each match (e.g. a*b|a), refused",
                               m.p->src, n, m.budget, PT_STEPS_PER_CP);
                    goto out;
                }
                if (!f || me == ms) break;
                if (ms > pos && push_len(&nxt, &nnxt, &capnxt, ms - pos)) goto oom;
                if (push_len(&nxt, &nnxt, &capnxt, me - ms)) goto oom;
                pos = me;
            }
            if (pos < seg_end && push_len(&nxt, &nnxt, &capnxt, seg_end - pos)) goto oom;
            base = seg_end;
        }
        size_t *t = cur; cur = nxt; nxt = t;
        size_t tn = ncur; ncur = nnxt; nnxt = tn;
        size_t tc = capcur; capcur = capnxt; capnxt = tc;
    }
    *lens = cur;
    *n_pieces = ncur;
    cur = NULL;
    rc = 0;
    goto out;
oom:
    bench_errf(err, errlen, "pre-tokenizer: out of memory for %zu code points", n);
out:
    free(cur);
    free(nxt);
    free(a.pc);
    free(b.pc);
    free(a.start);
    free(b.start);
    free(m.mark);
    return rc;
}
