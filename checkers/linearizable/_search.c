/* The compiled core of the linearizability search: checker.py's _search_python, in C.
 *
 * The same search, step for step (Wing & Gong with Lowe's memo, Porcupine's
 * order), over integers only: entry positions, op ids and interned model
 * states (sids). The model stays in Python. A transition (op, sid) -> sid' is
 * memoized here; on a miss the core calls back into Python, step(op, sid),
 * which runs the model's own step and interns the new state (-1 = illegal).
 * So a model is any Python Model, and the core touches Python only on a miss.
 *
 * Read it beside checker.py: run() is _search_python's loop. The memo of
 * configurations (linearized set, sid) is an open-addressing hash set; the
 * linearized set is a bitset over ranks (the ops in call order) whose hash is
 * kept incrementally (Zobrist: the xor of one random word per linearized op).
 * In Porcupine's order the set is nearly always a prefix of the ranks plus
 * some ranks not far past it, so an entry stores only that: lo (the lowest
 * rank not in the set), g (one past the highest rank in it) and the set's
 * bits from lo to g. That key is canonical and a hit compares all of it, so
 * the memo is exact, at a few dozen bytes an entry however many ops the
 * partition has. The search is resumable: run(max_work) returns after about
 * max_work loop iterations so the caller can interleave partitions and
 * enforce time budgets.
 *
 * Results of run(): 0 = not finished yet, 1 = linearizable, 2 = not
 * linearizable, 3 = the configuration or memo budget is used up.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <float.h>
#include <structmember.h>
#include <string.h>

enum { RUNNING = 0, FOUND_OK = 1, FOUND_ILLEGAL = 2, OVER_BUDGET = 3 };
#define MISS_COST 64 /* a call back into Python counts as this many loop iterations */

/* The transitions from one state: a short list of (op id, sid') pairs, scanned (the search asks
 * about the current state, so its row is hot), or once it holds DENSE_AT pairs an array over
 * all op ids (cap < 0; UNSEEN = not asked yet). The first pairs live in the row itself. */
#define INLINE_PAIRS 4
typedef struct { int32_t len, cap, *pairs, inline_pairs[2 * INLINE_PAIRS]; } Row; /* cap <= INLINE_PAIRS: inline */
#define DENSE_AT 16
enum { UNASKED = 0, BY_STEP, READS, WRITES, KEEPS }; /* an op's kind, from the model's effect() */
#define DENSE_MAX_OPS 65536
#define UNSEEN (-2)

/* One slot of the configuration memo: 8 bytes, so the slots stay small and a miss touches only
 * them. The slot holds the only copy of the entry's hash, 32 bits of it, enough to place the entry
 * in any table an arena of 32-bit offsets needs and to skip most other entries unread. */
typedef struct { uint32_t hash, at1; } CSlot; /* at1 = the entry's offset in the arena + 1, 0 = empty */

/* A memo entry is 32-bit units: HEAD of them (sid, lo, g) and then the set's bits from rank lo
 * on, ceil((g - lo) / 32) units. The budget charges a configuration its entry's bytes and
 * SLOT_BYTES for the table slots it takes at a load of 25-50 %, as checker.py's entry_bytes(). */
#define HEAD 3
#define SLOT_BYTES 32

typedef struct {
    PyObject_HEAD
    /* the entry list: positions 0 (head) .. tail, Porcupine's linked list as arrays */
    void *block; /* one allocation holding every array whose size is fixed by n */
    int32_t n, size, tail, nwords;
    int32_t *nxt, *prv, *match, *opid;
    int32_t *rank; /* call position -> the op's rank among the calls in time order */
    int32_t *twin; /* call position -> the rank of the earlier twin it waits for */
    uint64_t *zobrist; /* op id -> random word; the xor over linearized ops hashes the set */
    /* the model: either step(op id, sid) -> sid' or -1 (a Python callback that interns), or the
     * model's own step(state, input, output) -> (legal, state') called directly, interning into
     * the caller's states list and interned dict (state -> sid) here */
    PyObject *step, *model_step, *states, *interned, **inputs, **outputs;
    /* the model's optional effect(input, output): an op whose effect is a fixed shape is stepped
     * here, never in Python; asked once per op (kind UNASKED until then) */
    PyObject *effect;
    int8_t *kind;
    int32_t *target; /* the sid the op reads (READS) or writes (WRITES) */
    /* the search state: bits over ranks, nwords + 1 words (the last stays 0, so a scan for a
     * clear bit always ends); lo and g as in the memo's key, and each level's on the stack */
    uint64_t *bits, hash;
    int32_t sid, e, depth, lo, g, *calls, *saved, *saved_lo, *saved_g;
    int status;
    long long iterations, lookups;
    /* transitions, one row per state: sid -> (op id -> sid' or -1) */
    Row *rows;
    size_t nrows, tcount;
    /* configurations: open addressing over slots; the entries lie in insertion order in one
     * arena, each as long as its span; key is the one being looked up, built once per lookup */
    CSlot *slot;
    size_t scap;
    uint32_t *arena, *key;
    size_t ccount, alen, acap, mbytes; /* mbytes: what the budget charges for the entries */
    /* the longest prefix seen at a backtrack (and its state) */
    int32_t *best, best_len, best_sid;
    /* Porcupine's verbose mode: the longest prefix that includes each op */
    int track;
    int64_t *lng_off; /* op id -> offset in pool, -1 = none */
    int32_t *lng_len;
    int32_t *pool;
    size_t pool_len, pool_cap;
} Search;

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static int32_t *int_array(PyObject *seq, Py_ssize_t want, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return NULL;
    if (PySequence_Fast_GET_SIZE(fast) != want) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items", what, want);
        Py_DECREF(fast);
        return NULL;
    }
    int32_t *out = PyMem_Calloc(want ? want : 1, sizeof(int32_t));
    if (!out) { Py_DECREF(fast); PyErr_NoMemory(); return NULL; }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < want; i++) {
        long v = PyLong_AsLong(items[i]);
        if (v == -1 && PyErr_Occurred()) { PyMem_Free(out); Py_DECREF(fast); return NULL; }
        out[i] = (int32_t)v;
    }
    Py_DECREF(fast);
    return out;
}

/* ------------------------------------------------------------------ transitions */

/* the sid of state, a new one if it is new; -2 on a Python error */
static long intern_state(Search *s, PyObject *state) {
    PyObject *known = PyDict_GetItemWithError(s->interned, state);
    if (known) return PyLong_AsLong(known);
    if (PyErr_Occurred()) return -2;
    Py_ssize_t next = PyList_GET_SIZE(s->states);
    PyObject *id = next <= INT32_MAX ? PyLong_FromSsize_t(next) : NULL;
    long ns = (!id || PyDict_SetItem(s->interned, state, id) < 0 || PyList_Append(s->states, state) < 0) ? -2 : next;
    Py_XDECREF(id);
    return ns;
}

/* ask the model's effect() what kind of op this is; -1 on a Python error */
static int learn_kind(Search *s, int32_t op) {
    PyObject *args[2] = {s->inputs[op], s->outputs[op]};
    PyObject *r = PyObject_Vectorcall(s->effect, args, 2, NULL);
    if (!r) return -1;
    int kind = BY_STEP;
    long target = 0;
    if (r != Py_None) {
        PyObject *name = PyTuple_Check(r) && PyTuple_GET_SIZE(r) >= 1 ? PyTuple_GET_ITEM(r, 0) : NULL;
        Py_ssize_t size = PyTuple_Check(r) ? PyTuple_GET_SIZE(r) : -1;
        if (name && PyUnicode_Check(name) && size == 2 && !PyUnicode_CompareWithASCIIString(name, "reads"))
            kind = READS;
        else if (name && PyUnicode_Check(name) && size == 2 && !PyUnicode_CompareWithASCIIString(name, "writes"))
            kind = WRITES;
        else if (name && PyUnicode_Check(name) && size == 1 && !PyUnicode_CompareWithASCIIString(name, "keeps"))
            kind = KEEPS;
        else {
            Py_DECREF(r);
            PyErr_SetString(PyExc_ValueError, "a model's effect() must return None, (\"reads\", state), "
                                              "(\"writes\", state) or (\"keeps\",)");
            return -1;
        }
        if (kind != KEEPS && (target = intern_state(s, PyTuple_GET_ITEM(r, 1))) < 0) {
            Py_DECREF(r);
            return -1;
        }
    }
    Py_DECREF(r);
    s->kind[op] = (int8_t)kind, s->target[op] = (int32_t)target;
    return 0;
}

/* ask the model: sid' or -1, -2 on a Python error */
static long model_step(Search *s, int32_t op, int32_t sid) {
    if (!s->model_step) {
        PyObject *r = PyObject_CallFunction(s->step, "ii", (int)op, (int)sid);
        if (!r) return -2;
        long ns = PyLong_AsLong(r);
        Py_DECREF(r);
        if (ns == -1 && PyErr_Occurred()) return -2;
        if (ns < -1 || ns > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "step callback must return a state id >= 0 or -1");
            return -2;
        }
        return ns;
    }
    PyObject *args[3] = {PyList_GET_ITEM(s->states, sid), s->inputs[op], s->outputs[op]};
    PyObject *r = PyObject_Vectorcall(s->model_step, args, 3, NULL);
    if (!r) return -2;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "a model's step must return a (legal, state) tuple");
        return -2;
    }
    PyObject *ok = PyTuple_GET_ITEM(r, 0), *state = PyTuple_GET_ITEM(r, 1);
    int legal = ok == Py_True ? 1 : ok == Py_False ? 0 : PyObject_IsTrue(ok);
    long ns = legal < 0 ? -2 : !legal ? -1 : state == args[0] ? sid : intern_state(s, state);
    Py_DECREF(r);
    return ns;
}

/* remember sid -> op -> ns; -1 out of memory */
static int remember_step(Search *s, int32_t op, int32_t sid, int32_t ns) {
    if ((size_t)sid >= s->nrows) {
        size_t cap = s->nrows ? s->nrows : 8;
        while (cap <= (size_t)sid) cap *= 2;
        Row *rows = PyMem_Realloc(s->rows, cap * sizeof(Row));
        if (!rows) { PyErr_NoMemory(); return -1; }
        memset(rows + s->nrows, 0, (cap - s->nrows) * sizeof(Row));
        s->rows = rows, s->nrows = cap;
    }
    Row *r = &s->rows[sid];
    s->tcount++;
    if (r->cap < 0) { r->pairs[op] = ns; return 0; }
    if (r->cap == 0) r->cap = INLINE_PAIRS;
    int32_t *pairs = r->cap <= INLINE_PAIRS ? r->inline_pairs : r->pairs;
    if (r->len == r->cap) {
        if (r->len >= DENSE_AT && s->n <= DENSE_MAX_OPS) { /* a busy state: index by op id */
            int32_t *dense = PyMem_Malloc(s->n * sizeof(int32_t));
            if (!dense) { PyErr_NoMemory(); return -1; }
            for (int32_t i = 0; i < s->n; i++) dense[i] = UNSEEN;
            for (int32_t k = 0; k < r->len; k++) dense[pairs[2 * k]] = pairs[2 * k + 1];
            dense[op] = ns;
            PyMem_Free(r->pairs);
            r->pairs = dense, r->cap = -1;
            return 0;
        }
        int32_t cap = 2 * r->cap;
        int32_t *grown = PyMem_Malloc(2 * (size_t)cap * sizeof(int32_t));
        if (!grown) { PyErr_NoMemory(); return -1; }
        memcpy(grown, pairs, 2 * (size_t)r->len * sizeof(int32_t));
        PyMem_Free(r->pairs);
        r->pairs = pairs = grown, r->cap = cap;
    }
    pairs[2 * r->len] = op, pairs[2 * r->len + 1] = ns;
    r->len++;
    return 0;
}

/* sid' for (op, sid), asking the model on a miss; -1 illegal, -2 a Python error */
static inline int32_t transition(Search *s, int32_t op, int32_t sid, long *work) {
    int kind = s->kind[op];
    if (kind != BY_STEP) {
        if (kind == UNASKED) {
            *work += MISS_COST;
            if (!s->effect) s->kind[op] = BY_STEP;
            else if (learn_kind(s, op) < 0) return -2;
            kind = s->kind[op];
        }
        if (kind == READS) return sid == s->target[op] ? sid : -1;
        if (kind == WRITES) return s->target[op];
        if (kind == KEEPS) return sid;
    }
    if ((size_t)sid < s->nrows) {
        Row *r = &s->rows[sid];
        if (r->cap < 0) {
            if (r->pairs[op] != UNSEEN) return r->pairs[op];
        } else {
            const int32_t *pairs = r->cap <= INLINE_PAIRS ? r->inline_pairs : r->pairs;
            for (int32_t k = 0; k < r->len; k++)
                if (pairs[2 * k] == op) return pairs[2 * k + 1];
        }
    }
    *work += MISS_COST;
    long ns = model_step(s, op, sid);
    if (ns == -2 || remember_step(s, op, sid, (int32_t)ns) < 0) return -2;
    return (int32_t)ns;
}

/* ------------------------------------------------------------------ the memo of configurations */

static int cgrow_slots(Search *s) {
    size_t cap = s->scap ? s->scap * 2 : 64;
    CSlot *slot = PyMem_Calloc(cap, sizeof(CSlot));
    if (!slot) { PyErr_NoMemory(); return -1; }
    for (size_t i = 0; i < s->scap; i++) {
        if (!s->slot[i].at1) continue;
        size_t j = s->slot[i].hash & (cap - 1);
        while (slot[j].at1) j = (j + 1) & (cap - 1);
        slot[j] = s->slot[i];
    }
    PyMem_Free(s->slot);
    s->slot = slot, s->scap = cap;
    return 0;
}

/* the first rank at or after from that is not in bits */
static inline int32_t next_clear(const uint64_t *bits, int32_t from) {
    int32_t w = from >> 6;
    uint64_t x = ~bits[w] & (~0ULL << (from & 63));
    while (!x) x = ~bits[++w];
    return (w << 6) + __builtin_ctzll(x);
}

/* s->key := (sid, lo, g, bits from rank lo to g); its length in units. Bits from g on are clear,
 * so the last unit needs no mask, and the word after a span's last is at worst the zero word
 * past the bitset. */
static inline size_t make_key(Search *s, int32_t sid, int32_t lo, int32_t g) {
    uint32_t *k = s->key;
    k[0] = (uint32_t)sid, k[1] = (uint32_t)lo, k[2] = (uint32_t)g;
    size_t units = ((size_t)(g - lo) + 31) / 32;
    int sh = lo & 63;
    const uint64_t *from = s->bits + (lo >> 6);
    for (size_t u = 0; u < units; u += 2) {
        uint64_t w = sh ? from[u / 2] >> sh | from[u / 2 + 1] << (64 - sh) : from[u / 2];
        k[HEAD + u] = (uint32_t)w;
        if (u + 1 < units) k[HEAD + u + 1] = (uint32_t)(w >> 32);
    }
    return HEAD + units;
}

/* a span is a few units: a loop beats a call to memcmp */
static inline int same_span(const uint32_t *a, const uint32_t *b, size_t units) {
    for (size_t u = 0; u < units; u++)
        if (a[u] != b[u]) return 0;
    return 1;
}

/* Is s->key in the memo? *where = the empty slot to insert it at if not */
static int seen(Search *s, uint32_t hash, size_t units, size_t *where) {
    const uint32_t *k = s->key;
    size_t mask = s->scap - 1, j = hash & mask;
    for (; s->slot[j].at1; j = (j + 1) & mask) {
        if (s->slot[j].hash != hash) continue;
        const uint32_t *e = s->arena + (s->slot[j].at1 - 1);
        /* the head first: equal heads mean equal lengths, so the span compare stays inside e */
        if (e[0] == k[0] && e[1] == k[1] && e[2] == k[2] && same_span(e + HEAD, k + HEAD, units - HEAD)) return 1;
    }
    *where = j;
    return 0;
}

static int remember(Search *s, uint32_t hash, size_t units, size_t j) {
    if (s->alen + units > s->acap) {
        size_t cap = s->acap ? s->acap * 2 : 1024;
        while (cap < s->alen + units) cap *= 2;
        if (cap > UINT32_MAX) cap = UINT32_MAX; /* a slot holds a 32-bit offset */
        if (cap < s->alen + units) {
            PyErr_SetString(PyExc_MemoryError, "the memo of configurations outgrew its 16 GiB arena");
            return -1;
        }
        uint32_t *a = PyMem_Realloc(s->arena, cap * sizeof(uint32_t));
        if (!a) { PyErr_NoMemory(); return -1; }
        s->arena = a, s->acap = cap;
    }
    size_t at = s->alen;
    memcpy(s->arena + at, s->key, units * sizeof(uint32_t));
    s->alen += units;
    s->ccount++;
    s->slot[j].hash = hash, s->slot[j].at1 = (uint32_t)(at + 1);
    return 2 * s->ccount > s->scap ? cgrow_slots(s) : 0;
}

/* A test build (-DCONFIG_HASH_BITS=3) keeps only so many bits of each configuration's hash: then
 * nearly every lookup meets entries with its hash, and the memo is exact only if the compare is. */
#ifndef CONFIG_HASH_BITS
#define CONFIG_HASH_BITS 32
#endif
#define CONFIG_HASH_MASK (CONFIG_HASH_BITS >= 32 ? ~0U : (1U << (CONFIG_HASH_BITS % 32)) - 1)

static inline uint32_t config_hash(uint64_t set_hash, int32_t sid) {
    return (uint32_t)(splitmix(set_hash ^ ((uint64_t)(uint32_t)sid * 0xD6E8FEB86659FD93ULL)) >> 32) & CONFIG_HASH_MASK;
}

/* ------------------------------------------------------------------ longest prefixes */

static int record_longest(Search *s) {
    if (s->depth > s->best_len) {
        memcpy(s->best, s->calls, s->depth * sizeof(int32_t));
        s->best_len = s->depth;
        s->best_sid = s->sid; /* the state after the prefix */
    }
    if (!s->track) return 0;
    int64_t off = -1;
    for (int32_t k = 0; k < s->depth; k++) {
        int32_t o = s->opid[s->calls[k]];
        if (s->depth > s->lng_len[o]) {
            if (off < 0) { /* copy the prefix once, as Porcupine's lazy seq */
                if (s->pool_len + s->depth > s->pool_cap) {
                    size_t cap = s->pool_cap ? s->pool_cap * 2 : 4096;
                    while (cap < s->pool_len + s->depth) cap *= 2;
                    int32_t *p = PyMem_Realloc(s->pool, cap * sizeof(int32_t));
                    if (!p) { PyErr_NoMemory(); return -1; }
                    s->pool = p, s->pool_cap = cap;
                }
                off = (int64_t)s->pool_len;
                for (int32_t q = 0; q < s->depth; q++) s->pool[off + q] = s->opid[s->calls[q]];
                s->pool_len += s->depth;
            }
            s->lng_len[o] = s->depth;
            s->lng_off[o] = off;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ the search */

static PyObject *Search_run(Search *s, PyObject *args) {
    long max_work;
    long long max_configurations, max_bytes;
    if (!PyArg_ParseTuple(args, "lLL", &max_work, &max_configurations, &max_bytes)) return NULL;
    if (s->status != RUNNING) return PyLong_FromLong(s->status);
    int32_t *nxt = s->nxt, *prv = s->prv, *match = s->match, *opid = s->opid, *rank = s->rank, *twin = s->twin;
    uint64_t *bits = s->bits;
    int32_t e = s->e, sid = s->sid, tail = s->tail, lo = s->lo, g = s->g;
    uint64_t h = s->hash;
    long work = 0;
    int status = RUNNING;
    while (work < max_work) {
        work++;
        int32_t m = match[e];
        if (m) { /* a call: try to linearize it here */
            if (m < 0) { /* a twin: only after its earlier twin */
                int32_t t = twin[e];
                if (!((bits[t >> 6] >> (t & 63)) & 1)) { e = nxt[e]; continue; }
                m = -m;
            }
            int32_t o = opid[e], r = rank[e];
            int32_t ns = transition(s, o, sid, &work);
            if (ns == -2) { s->e = e, s->sid = sid, s->hash = h, s->lo = lo, s->g = g; return NULL; }
            if (ns >= 0) {
                uint64_t nh = h ^ s->zobrist[o];
                size_t j;
                bits[r >> 6] |= 1ULL << (r & 63);
                int32_t nlo = r == lo ? next_clear(bits, lo) : lo, ng = r >= g ? r + 1 : g;
                uint32_t ch = config_hash(nh, ns);
                size_t units = make_key(s, ns, nlo, ng);
                s->lookups++;
                if (!seen(s, ch, units, &j)) {
                    size_t cost = units * sizeof(uint32_t) + SLOT_BYTES;
                    if ((long long)s->ccount >= max_configurations || (long long)(s->mbytes + cost) > max_bytes) {
                        bits[r >> 6] &= ~(1ULL << (r & 63));
                        status = OVER_BUDGET;
                        break;
                    }
                    if (remember(s, ch, units, j) < 0) {
                        bits[r >> 6] &= ~(1ULL << (r & 63));
                        s->e = e, s->sid = sid, s->hash = h, s->lo = lo, s->g = g;
                        return NULL;
                    }
                    s->mbytes += cost;
                    s->calls[s->depth] = e;
                    s->saved[s->depth] = sid;
                    s->saved_lo[s->depth] = lo, s->saved_g[s->depth] = g;
                    s->depth++;
                    sid = ns, h = nh, lo = nlo, g = ng;
                    int32_t p = prv[e], q = nxt[e]; nxt[p] = q; prv[q] = p; /* lift the call */
                    p = prv[m], q = nxt[m]; nxt[p] = q; prv[q] = p;       /* and its return */
                    e = nxt[0];
                    if (e == tail) { status = FOUND_OK; break; }
                    continue;
                }
                bits[r >> 6] &= ~(1ULL << (r & 63));
            }
            e = nxt[e];
        } else { /* a return: every candidate before it failed; backtrack */
            if (!s->depth) { status = FOUND_ILLEGAL; break; }
            s->sid = sid;
            if (record_longest(s) < 0) { s->e = e, s->hash = h, s->lo = lo, s->g = g; return NULL; }
            s->depth--;
            e = s->calls[s->depth];
            sid = s->saved[s->depth];
            lo = s->saved_lo[s->depth], g = s->saved_g[s->depth];
            int32_t r = rank[e];
            bits[r >> 6] &= ~(1ULL << (r & 63));
            h ^= s->zobrist[opid[e]];
            m = match[e];
            if (m < 0) m = -m;
            nxt[prv[m]] = m; prv[nxt[m]] = m; /* unlift the return */
            nxt[prv[e]] = e; prv[nxt[e]] = e; /* and the call */
            e = nxt[e];
        }
    }
    s->iterations += work;
    s->e = e, s->sid = sid, s->hash = h, s->lo = lo, s->g = g, s->status = status;
    return PyLong_FromLong(status);
}

/* ------------------------------------------------------------------ the Python type */

static void Search_dealloc(Search *s) {
    for (size_t i = 0; i < s->nrows; i++) PyMem_Free(s->rows[i].pairs);
    PyMem_Free(s->rows); PyMem_Free(s->slot); PyMem_Free(s->arena); PyMem_Free(s->pool);
    Py_XDECREF(s->step); Py_XDECREF(s->model_step); Py_XDECREF(s->states); Py_XDECREF(s->interned);
    Py_XDECREF(s->effect);
    if (s->block)
        for (int32_t i = 0; i < s->n; i++) Py_XDECREF(s->inputs[i]), Py_XDECREF(s->outputs[i]);
    PyMem_Free(s->block);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* one call or return, to sort into the entry list */
typedef struct { long double t; int32_t kind, op; } Event;

static int by_time(const void *pa, const void *pb) {
    const Event *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->kind != b->kind) return a->kind - b->kind; /* calls (0) before returns (1): closed intervals */
    return a->op - b->op;
}

/* a time as a sort key that orders ints and floats exactly as Python does: a long double holds
 * every int64 and every double exactly where it has a 64-bit mantissa (x86-64, aarch64) */
static int time_key(PyObject *o, long double *out) {
    if (PyLong_Check(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_OverflowError, "op times must fit in 64 bits");
            return -1;
        }
#if LDBL_MANT_DIG < 64
        if (v > (1LL << 53) || v < -(1LL << 53)) {
            PyErr_SetString(PyExc_OverflowError, "op times beyond 2**53 need a 64-bit long double");
            return -1;
        }
#endif
        *out = (long double)v;
        return 0;
    }
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    if (d != d) {
        PyErr_SetString(PyExc_ValueError, "an op time is NaN");
        return -1;
    }
    *out = d;
    return 0;
}

static PyObject *ATTR_CALL, *ATTR_RETURN, *ATTR_INPUT, *ATTR_OUTPUT;

/* An Operation is a slots dataclass: its fields are member descriptors at fixed offsets, read
 * directly once the type is known (anything else goes through getattr) */
static PyTypeObject *fast_type;
static Py_ssize_t fast_offset[4];

static int learn_offsets(PyTypeObject *type) {
    PyObject *names[4] = {ATTR_CALL, ATTR_RETURN, ATTR_INPUT, ATTR_OUTPUT};
    Py_ssize_t off[4];
    for (int k = 0; k < 4; k++) {
        PyObject *d = _PyType_Lookup(type, names[k]);
        if (!d || !Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX)
            return 0;
        off[k] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    memcpy(fast_offset, off, sizeof off);
    fast_type = type;
    return 1;
}

/* a new reference to field k (0 call, 1 return_time, 2 input, 3 output) of op */
static PyObject *field(PyObject *op, int k) {
    static PyObject **names[4] = {&ATTR_CALL, &ATTR_RETURN, &ATTR_INPUT, &ATTR_OUTPUT};
    if (Py_TYPE(op) == fast_type || learn_offsets(Py_TYPE(op))) {
        if (Py_TYPE(op) == fast_type) {
            PyObject *v = *(PyObject **)((char *)op + fast_offset[k]);
            if (v) return Py_NewRef(v);
        }
    }
    return PyObject_GetAttr(op, *names[k]);
}

/* Porcupine's makeEntries: read each op, sort the 2n calls and returns into positions 1..2n */
static int make_entries(Search *s, PyObject *ops, PyObject *twins) {
    int32_t n = s->n;
    Event *ev = PyMem_Malloc(2 * (size_t)n * sizeof(Event));
    int32_t *call_pos = PyMem_Calloc(n, sizeof(int32_t));
    int32_t *twin_of = NULL;
    if (!ev || !call_pos) { PyMem_Free(ev); PyMem_Free(call_pos); PyErr_NoMemory(); return -1; }
    int rc = -1;
    for (int32_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i), *call = NULL, *ret = NULL;
        int bad = !(call = field(op, 0)) || !(ret = field(op, 1)) || time_key(call, &ev[2 * i].t) < 0
                  || time_key(ret, &ev[2 * i + 1].t) < 0 || !(s->inputs[i] = field(op, 2))
                  || !(s->outputs[i] = field(op, 3));
        Py_XDECREF(call);
        Py_XDECREF(ret);
        if (bad) goto done;
        if (ev[2 * i + 1].t < ev[2 * i].t) {
            PyErr_Format(PyExc_ValueError, "op %d returns before it is called", (int)i);
            goto done;
        }
        ev[2 * i].kind = 0, ev[2 * i].op = i, ev[2 * i + 1].kind = 1, ev[2 * i + 1].op = i;
    }
    if (n <= 32) { /* insertion sort: small partitions are the common case, and qsort allocates */
        for (int32_t i = 1; i < 2 * n; i++) {
            Event x = ev[i];
            int32_t j = i - 1;
            for (; j >= 0 && by_time(&ev[j], &x) > 0; j--) ev[j + 1] = ev[j];
            ev[j + 1] = x;
        }
    } else {
        qsort(ev, 2 * (size_t)n, sizeof(Event), by_time);
    }
    for (int32_t pos = 1, calls = 0; pos <= 2 * n; pos++) {
        Event *x = &ev[pos - 1];
        if (x->kind == 0) s->opid[pos] = x->op, s->rank[pos] = calls++, call_pos[x->op] = pos;
        else s->match[call_pos[x->op]] = pos;
    }
    if (twins != Py_None) { /* a call whose earlier twin is unlinearized is skipped: match < 0 */
        if (!(twin_of = int_array(twins, n, "twins"))) goto done;
        for (int32_t i = 0; i < n; i++) {
            int32_t t = twin_of[i];
            if (t < 0) continue;
            if (t >= n || t == i) {
                PyErr_SetString(PyExc_ValueError, "twins: not an op id");
                goto done;
            }
            s->twin[call_pos[i]] = s->rank[call_pos[t]];
            s->match[call_pos[i]] = -s->match[call_pos[i]];
        }
    }
    rc = 0;
done:
    PyMem_Free(ev);
    PyMem_Free(call_pos);
    PyMem_Free(twin_of);
    return rc;
}

/* Search(ops, twins, track, step=None, model_step=None, states=None, interned=None, effect=None): ops are
 * Operations (call, return_time = INF if it never returned, input, output), twins each op's
 * earlier twin or -1 (or None); the model is either the callback step(op id, sid) or
 * model_step(state, input, output) with the states list (sid -> state, sid 0 = the initial
 * state) and the interned dict (state -> sid), and then optionally the model's effect() */
static int Search_init(Search *s, PyObject *args, PyObject *kw) {
    static char *names[] = {"ops", "twins", "track", "step", "model_step", "states", "interned", "effect", NULL};
    int track;
    PyObject *ops, *twins, *step = Py_None, *mstep = Py_None, *states = Py_None, *interned = Py_None,
             *effect = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!Op|OOOOO", names, &PyList_Type, &ops, &twins, &track, &step,
                                     &mstep, &states, &interned, &effect))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(ops);
    if (n < 1 || n > INT32_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "Search needs at least one op");
        return -1;
    }
    if (mstep != Py_None) {
        if (!PyCallable_Check(mstep) || !PyList_CheckExact(states) || PyList_GET_SIZE(states) < 1
            || !PyDict_CheckExact(interned)) {
            PyErr_SetString(PyExc_ValueError, "model_step needs a non-empty states list and an interned dict");
            return -1;
        }
        Py_INCREF(mstep), Py_INCREF(states), Py_INCREF(interned);
        s->model_step = mstep, s->states = states, s->interned = interned;
        if (effect != Py_None) {
            if (!PyCallable_Check(effect)) {
                PyErr_SetString(PyExc_ValueError, "effect must be callable or None");
                return -1;
            }
            Py_INCREF(effect);
            s->effect = effect;
        }
    } else if (PyCallable_Check(step)) {
        Py_INCREF(step);
        s->step = step;
    } else {
        PyErr_SetString(PyExc_ValueError, "Search needs a callable step or model_step");
        return -1;
    }
    s->n = (int32_t)n, s->size = 2 * s->n + 2, s->tail = s->size - 1, s->nwords = (s->n + 63) / 64;
    s->track = track;
    size_t sz = (size_t)s->size, nn = (size_t)n;
    size_t bytes = (2 * nn + s->nwords + 1) * sizeof(uint64_t) + 2 * nn * sizeof(PyObject *)
                   + (6 * sz + 7 * nn + HEAD + 2 * (size_t)s->nwords) * sizeof(int32_t) + nn * sizeof(int8_t);
    char *b = s->block = PyMem_Calloc(1, bytes);
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    s->zobrist = (uint64_t *)b, b += nn * sizeof(uint64_t);
    s->lng_off = (int64_t *)b, b += nn * sizeof(int64_t);
    s->bits = (uint64_t *)b, b += (s->nwords + 1) * sizeof(uint64_t);
    s->inputs = (PyObject **)b, b += nn * sizeof(PyObject *);
    s->outputs = (PyObject **)b, b += nn * sizeof(PyObject *);
    s->match = (int32_t *)b, b += sz * sizeof(int32_t);
    s->opid = (int32_t *)b, b += sz * sizeof(int32_t);
    s->rank = (int32_t *)b, b += sz * sizeof(int32_t);
    s->twin = (int32_t *)b, b += sz * sizeof(int32_t);
    s->nxt = (int32_t *)b, b += sz * sizeof(int32_t);
    s->prv = (int32_t *)b, b += sz * sizeof(int32_t);
    s->calls = (int32_t *)b, b += nn * sizeof(int32_t);
    s->saved = (int32_t *)b, b += nn * sizeof(int32_t);
    s->saved_lo = (int32_t *)b, b += nn * sizeof(int32_t);
    s->saved_g = (int32_t *)b, b += nn * sizeof(int32_t);
    s->best = (int32_t *)b, b += nn * sizeof(int32_t);
    s->target = (int32_t *)b, b += nn * sizeof(int32_t);
    s->lng_len = (int32_t *)b, b += nn * sizeof(int32_t);
    s->key = (uint32_t *)b, b += (HEAD + 2 * (size_t)s->nwords) * sizeof(uint32_t);
    s->kind = (int8_t *)b;
    if (make_entries(s, ops, twins) < 0) return -1;
    for (int32_t i = 0; i < s->size; i++) s->nxt[i] = i + 1, s->prv[i] = i - 1;
    s->nxt[s->tail] = s->tail, s->prv[0] = 0;
    for (int32_t i = 0; i < s->n; i++) s->zobrist[i] = splitmix(0x5EED0000ULL + (uint64_t)i), s->lng_off[i] = -1;
    if (cgrow_slots(s) < 0) return -1;
    s->e = s->nxt[0], s->sid = 0, s->status = RUNNING, s->best_sid = 0;
    return 0;
}

static PyObject *ids(const int32_t *seq, Py_ssize_t len, const int32_t *map) {
    PyObject *out = PyList_New(len);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *v = PyLong_FromLong(map ? map[seq[i]] : seq[i]);
        if (!v) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* (op ids of the longest prefix, the sid after it); on success the whole linearization */
static PyObject *Search_longest(Search *s, PyObject *unused) {
    if (s->status == FOUND_OK) {
        PyObject *seq = ids(s->calls, s->depth, s->opid);
        return seq ? Py_BuildValue("(Ni)", seq, (int)s->sid) : NULL;
    }
    PyObject *seq = ids(s->best, s->best_len, s->opid);
    return seq ? Py_BuildValue("(Ni)", seq, (int)s->best_sid) : NULL;
}

/* After the longest prefix: (ops that could come next, the first op to return) in list order.
 * The list is whole again once the search has failed, so this walks positions 1..2n. */
static PyObject *Search_next_after_longest(Search *s, PyObject *unused) {
    uint8_t *done = PyMem_Calloc(s->n, 1);
    int32_t *ret_op = PyMem_Malloc(s->size * sizeof(int32_t));
    PyObject *cands = PyList_New(0);
    if (!done || !ret_op || !cands) {
        PyMem_Free(done), PyMem_Free(ret_op), Py_XDECREF(cands);
        return PyErr_NoMemory();
    }
    for (int32_t k = 0; k < s->best_len; k++) done[s->opid[s->best[k]]] = 1;
    for (int32_t pos = 1; pos < s->tail; pos++)
        if (s->match[pos]) ret_op[s->match[pos] < 0 ? -s->match[pos] : s->match[pos]] = s->opid[pos];
    long first = -1;
    for (int32_t pos = 1; pos < s->tail && first < 0; pos++) {
        if (s->match[pos]) {
            if (done[s->opid[pos]]) continue;
            PyObject *o = PyLong_FromLong(s->opid[pos]);
            if (!o || PyList_Append(cands, o) < 0) { Py_XDECREF(o); Py_DECREF(cands); cands = NULL; break; }
            Py_DECREF(o);
        } else if (!done[ret_op[pos]]) {
            first = ret_op[pos];
        }
    }
    PyMem_Free(done);
    PyMem_Free(ret_op);
    return cands ? Py_BuildValue("(Nl)", cands, first) : NULL;
}

/* Porcupine's partial linearizations: the distinct longest prefixes, each op's once */
static PyObject *Search_partials(Search *s, PyObject *unused) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    if (s->status == FOUND_OK) {
        PyObject *seq = ids(s->calls, s->depth, s->opid);
        if (!seq || PyList_Append(out, seq) < 0) { Py_XDECREF(seq); Py_DECREF(out); return NULL; }
        Py_DECREF(seq);
        return out;
    }
    int64_t *seen = PyMem_Malloc((s->n ? s->n : 1) * sizeof(int64_t));
    if (!seen) { Py_DECREF(out); return PyErr_NoMemory(); }
    int32_t nseen = 0;
    for (int32_t o = 0; o < s->n; o++) {
        int64_t off = s->lng_off[o];
        if (off < 0) continue;
        int dup = 0;
        for (int32_t k = 0; k < nseen && !dup; k++) dup = seen[k] == off;
        if (dup) continue;
        seen[nseen++] = off;
        PyObject *seq = ids(s->pool + off, s->lng_len[o], NULL);
        if (!seq || PyList_Append(out, seq) < 0) { Py_XDECREF(seq); Py_DECREF(out); PyMem_Free(seen); return NULL; }
        Py_DECREF(seq);
    }
    PyMem_Free(seen);
    return out;
}

static PyObject *Search_configurations(Search *s, void *unused) { return PyLong_FromSize_t(s->ccount); }
static PyObject *Search_memo_bytes(Search *s, void *unused) { return PyLong_FromSize_t(s->mbytes); }
static PyObject *Search_transitions(Search *s, void *unused) { return PyLong_FromSize_t(s->tcount); }
static PyObject *Search_iterations(Search *s, void *unused) { return PyLong_FromLongLong(s->iterations); }
static PyObject *Search_lookups(Search *s, void *unused) { return PyLong_FromLongLong(s->lookups); }

static PyMethodDef Search_methods[] = {
    {"run", (PyCFunction)Search_run, METH_VARARGS,
     "run(max_work, max_configurations, max_bytes) -> 0 running, 1 linearizable, 2 not linearizable, 3 over budget"},
    {"longest", (PyCFunction)Search_longest, METH_NOARGS, "(op ids of the longest prefix, its state id)"},
    {"partials", (PyCFunction)Search_partials, METH_NOARGS, "the longest prefix of each op, de-duplicated"},
    {"next_after_longest", (PyCFunction)Search_next_after_longest, METH_NOARGS,
     "(op ids that could follow the longest prefix, the first op id to return after it or -1)"},
    {NULL},
};

static PyGetSetDef Search_getset[] = {
    {"configurations", (getter)Search_configurations, NULL, "memo size", NULL},
    {"memo_bytes", (getter)Search_memo_bytes, NULL, "memo size as the budget counts it", NULL},
    {"transitions", (getter)Search_transitions, NULL, "memoized (op, state) steps", NULL},
    {"iterations", (getter)Search_iterations, NULL, "loop iterations (a call back counts as many)", NULL},
    {"lookups", (getter)Search_lookups, NULL, "memo lookups of configurations", NULL},
    {NULL},
};

static PyTypeObject SearchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "checkers.linearizable._search.Search",
    .tp_basicsize = sizeof(Search),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One partition's resumable linearizability search over interned states.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Search_init,
    .tp_dealloc = (destructor)Search_dealloc,
    .tp_methods = Search_methods,
    .tp_getset = Search_getset,
};

/* positions(ops, parts) -> for each part, the index in ops of each of its ops (by identity) */
static PyObject *positions(PyObject *self, PyObject *args) {
    PyObject *ops, *parts;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &ops, &PyList_Type, &parts)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ops);
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    PyObject **key = PyMem_Calloc(cap, sizeof(PyObject *));
    Py_ssize_t *val = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    PyObject *out = PyList_New(PyList_GET_SIZE(parts));
    if (!key || !val || !out) {
        PyMem_Free(key), PyMem_Free(val), Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(ops, i);
        size_t j = splitmix((uint64_t)(uintptr_t)k) & (cap - 1);
        while (key[j] && key[j] != k) j = (j + 1) & (cap - 1);
        key[j] = k, val[j] = i;
    }
    for (Py_ssize_t p = 0; p < PyList_GET_SIZE(parts); p++) {
        PyObject *part = PySequence_Fast(PyList_GET_ITEM(parts, p), "a partition must be a sequence of ops");
        PyObject *idx = part ? PyList_New(PySequence_Fast_GET_SIZE(part)) : NULL;
        if (!idx) { Py_XDECREF(part); goto fail; }
        PyList_SET_ITEM(out, p, idx);
        for (Py_ssize_t q = 0; q < PySequence_Fast_GET_SIZE(part); q++) {
            PyObject *k = PySequence_Fast_ITEMS(part)[q];
            size_t j = splitmix((uint64_t)(uintptr_t)k) & (cap - 1);
            while (key[j] && key[j] != k) j = (j + 1) & (cap - 1);
            PyObject *v = key[j] ? PyLong_FromSsize_t(val[j]) : NULL;
            if (!v) {
                if (!key[j]) PyErr_SetString(PyExc_KeyError, "a partition holds an op that is not in the history");
                Py_DECREF(part);
                goto fail;
            }
            PyList_SET_ITEM(idx, q, v);
        }
        Py_DECREF(part);
    }
    PyMem_Free(key), PyMem_Free(val);
    return out;
fail:
    PyMem_Free(key), PyMem_Free(val), Py_DECREF(out);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"positions", positions, METH_VARARGS, "positions(ops, parts) -> each part's op indices in ops, by identity"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_search", "The compiled linearizability search.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__search(void) {
    if (PyType_Ready(&SearchType) < 0) return NULL;
    if (!(ATTR_CALL = PyUnicode_InternFromString("call")) || !(ATTR_RETURN = PyUnicode_InternFromString("return_time"))
        || !(ATTR_INPUT = PyUnicode_InternFromString("input")) || !(ATTR_OUTPUT = PyUnicode_InternFromString("output")))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&SearchType);
    if (PyModule_AddObject(m, "Search", (PyObject *)&SearchType) < 0) {
        Py_DECREF(&SearchType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
