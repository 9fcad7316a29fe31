/* Report rows printed in C, for the ordinary records: engine/row_text.py builds each row shape's
   plan (its fixed text cut where the values go, and how each value is read and printed) from
   its own field tables and the reference encoder, and hands the plans over once (`configure`).
   `row(record)` prints the record's row, or answers None whenever anything is unusual (a value
   of another type, a non-finite number, a string to escape, a number too large for the fast
   printer): the Python printers then print the row or raise the report's error. So this file
   decides nothing about the text; tests/engine_io/test_row_text.py pins both printers to the
   same bytes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <string.h>

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

/* How a value is read from the object the plan prints, and printed (in the order of
   engine/row_text.py's _OPS, which a test compares). */
enum {
    OP_FLOAT,      /* name: a float or None */
    OP_INT,        /* name: an int or None */
    OP_STR,        /* name: a str or None */
    OP_BOOL,       /* name: True, False or None */
    OP_UUID,       /* name: the ordinal; the uuid ordinal + 1 */
    OP_OR_NONE,    /* name: a str, None when empty (`r.request_id or None`) */
    OP_COUNT,      /* name: the length of a list */
    OP_SPAN,       /* name - name2, 0.0 when negative; None when name is None */
    OP_PER_TOKEN,  /* (name - name2, 0.0 when negative) / (output_length - 1): put_per_token */
    OP_NESTED,     /* name: printed by the Python helper `nested` (an agentic mapping) */
    OP_ADMISSIONS, /* name: a list of admissions */
    OP_ROUTES,     /* name: a list of routing decisions */
    OP_COUNT_OF_OPS
};

/* Where a class keeps an attribute: the offset of its __slots__ member, valid while the class
   is `type` at version `version` (the inline caches of CPython's own attribute loads). */
typedef struct {
    PyTypeObject *type;
    unsigned int version;
    Py_ssize_t offset;
} Slot;

/* obj.name (a new reference, or NULL with an exception set). A slot of the object's class is
   read in place (a __slots__ member, the class unchanged since, its attribute access the
   generic one): what PyObject_GetAttr would find, without looking it up each time. */
static PyObject *
get(PyObject *obj, PyObject *name, Slot *slot)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (slot->type != type || slot->version != type->tp_version_tag
            || !(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        slot->type = NULL;
        PyObject *descriptor = type->tp_getattro == PyObject_GenericGetAttr
                                   ? _PyType_Lookup(type, name) : NULL;  /* borrowed */
        if (descriptor == NULL || !Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
                || !(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
            return PyObject_GetAttr(obj, name);
        PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
        if (member->type != Py_T_OBJECT_EX)
            return PyObject_GetAttr(obj, name);
        slot->type = type;
        slot->version = type->tp_version_tag;
        slot->offset = member->offset;
    }
    PyObject *value = *(PyObject **)((char *)obj + slot->offset);
    if (value == NULL) {  /* a slot never set */
        PyErr_SetObject(PyExc_AttributeError, name);
        return NULL;
    }
    return Py_NewRef(value);
}

typedef struct {
    const char *piece;  /* the fixed text before the value */
    Py_ssize_t piece_size;
    int op;
    PyObject *name, *name2;  /* borrowed from the plan tuple, which the module keeps */
    Slot slot, slot2;  /* where name and name2 were last found */
} Step;

typedef struct {
    Py_ssize_t size;
    Step *steps;
    const char *tail;  /* the fixed text after the last value */
    Py_ssize_t tail_size;
} Plan;

#define SHAPES 8  /* agentic, with a warmup phase, with a host tier: 3 flags */

static struct {
    int ready;
    PyObject *keep;  /* every object the plans point into */
    Plan rows[SHAPES], admission_plain, admission_split, route;
    const char *open, *separator, *close;  /* a history list's layout */
    Py_ssize_t open_size, separator_size, close_size;
    PyObject *nested;  /* prints an agentic mapping */
    PyObject *agentic, *agentic_phase, *host, *g1, *output_length;  /* attribute names */
    Slot agentic_slot, phase_slot, host_slot, g1_slot, output_length_slot;
} state;

/* A growing ASCII buffer: rows fit the stack one; long histories move to the heap. */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
    char stack[8192];
} Writer;

static int
reserve(Writer *w, Py_ssize_t extra)
{
    if (w->size + extra <= w->capacity)
        return 0;
    Py_ssize_t capacity = w->capacity * 2;
    if (capacity < w->size + extra)
        capacity = w->size + extra;
    char *data;
    if (w->data == w->stack) {
        data = PyMem_Malloc(capacity);
        if (data != NULL)
            memcpy(data, w->stack, w->size);
    }
    else
        data = PyMem_Realloc(w->data, capacity);
    if (data == NULL)
        return -1;
    w->data = data;
    w->capacity = capacity;
    return 0;
}

static int
put(Writer *w, const char *text, Py_ssize_t size)
{
    if (reserve(w, size) < 0)
        return -1;
    memcpy(w->data + w->size, text, size);
    w->size += size;
    return 0;
}

/* n's decimal digits (int.__repr__), then `tail`. */
static int
put_whole(Writer *w, long long n, int negative, const char *tail, Py_ssize_t tail_size)
{
    char digits[24];
    char *end = digits + sizeof digits, *p = end;
    unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (negative)
        *--p = '-';
    if (put(w, p, end - p) < 0)
        return -1;
    return put(w, tail, tail_size);
}

/* float.__repr__ of a finite double; -1 for a non-finite one (the report refuses those). */
static int
put_double(Writer *w, double d)
{
    if (!isfinite(d))
        return -1;
    if (d == floor(d) && fabs(d) < 1e16)  /* repr prints these as digits + ".0"; faster here */
        return put_whole(w, (long long)d, signbit(d) != 0, ".0", 2);
    char *text = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL)
        return -1;
    int done = put(w, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return done;
}

static int
put_float(Writer *w, PyObject *v)
{
    if (v == Py_None)
        return put(w, "null", 4);
    if (!PyFloat_CheckExact(v))
        return -1;
    return put_double(w, PyFloat_AS_DOUBLE(v));
}

static int
put_int(Writer *w, PyObject *v)
{
    if (v == Py_None)
        return put(w, "null", 4);
    if (!PyLong_CheckExact(v))
        return -1;
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (n == -1 && PyErr_Occurred()))
        return -1;
    return put_whole(w, n, n < 0, "", 0);
}

/* A str needing no escape and no encoding: quoted as json.encoder.encode_basestring quotes
   it. Any other str (non-ASCII, a quote, a backslash, a control character) is left to Python. */
static int
put_str(Writer *w, PyObject *v)
{
    if (v == Py_None)
        return put(w, "null", 4);
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
        return -1;
    const Py_UCS1 *text = PyUnicode_1BYTE_DATA(v);
    Py_ssize_t size = PyUnicode_GET_LENGTH(v);
    for (Py_ssize_t i = 0; i < size; i++)
        if (text[i] < 0x20 || text[i] == '"' || text[i] == '\\')
            return -1;
    if (reserve(w, size + 2) < 0)
        return -1;
    w->data[w->size++] = '"';
    memcpy(w->data + w->size, text, size);
    w->size += size;
    w->data[w->size++] = '"';
    return 0;
}

static int
put_bool(Writer *w, PyObject *v)
{
    if (v == Py_True)
        return put(w, "true", 4);
    if (v == Py_False)
        return put(w, "false", 5);
    if (v == Py_None)
        return put(w, "null", 4);
    return -1;
}

/* The uuid of a 0-based ordinal below 2**48 - 1: "00000000-0000-0000-0000-" + 12 hex digits of
   ordinal + 1 (uuid_for); larger or odd ordinals are left to Python. */
static int
put_uuid(Writer *w, PyObject *v)
{
    if (!PyLong_CheckExact(v))
        return -1;
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || n < 0 || n >= 0xFFFFFFFFFFFFLL)
        return -1;
    static const char hex[] = "0123456789abcdef";
    char text[39] = "\"00000000-0000-0000-0000-000000000000\"";
    unsigned long long u = (unsigned long long)n + 1;
    for (int i = 36; i > 24; i--, u >>= 4)
        text[i] = hex[u & 15];
    return put(w, text, 38);
}

/* end - start, 0.0 when negative (`0.0 if x < 0.0 else x`: -0.0 stays); None when end is None.
   Both must be floats; a missing start is left to Python (it raises there). */
static int
span(PyObject *end, PyObject *start, double *out)
{
    if (!PyFloat_CheckExact(end) || !PyFloat_CheckExact(start))
        return -1;
    double x = PyFloat_AS_DOUBLE(end) - PyFloat_AS_DOUBLE(start);
    *out = x < 0.0 ? 0.0 : x;
    return 0;
}

static int run(Writer *w, PyObject *obj, Plan *plan);

/* A history list as canonical_json prints it inside a row: "[]", or its entries between the
   list's opening, separators and closing. `admissions`: each entry is an admission, printed with
   the G1/host split plan when its g1 count is known (else a routing decision). */
static int
put_history(Writer *w, PyObject *v, int admissions)
{
    if (!PyList_CheckExact(v))
        return -1;
    Py_ssize_t size = PyList_GET_SIZE(v);
    if (size == 0)
        return put(w, "[]", 2);
    if (put(w, state.open, state.open_size) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < size; i++) {
        if (i && put(w, state.separator, state.separator_size) < 0)
            return -1;
        PyObject *entry = PyList_GET_ITEM(v, i);
        Py_INCREF(entry);  /* the list may not outlive a callback */
        Plan *plan = &state.route;
        if (admissions) {
            PyObject *g1 = get(entry, state.g1, &state.g1_slot);
            if (g1 == NULL) {
                Py_DECREF(entry);
                return -1;
            }
            plan = g1 == Py_None ? &state.admission_plain : &state.admission_split;
            Py_DECREF(g1);
        }
        int done = run(w, entry, plan);
        Py_DECREF(entry);
        if (done < 0)
            return -1;
    }
    return put(w, state.close, state.close_size);
}

/* The printed text of a nested value (an agentic mapping), by the Python helper; ASCII only. */
static int
put_nested(Writer *w, PyObject *v)
{
    PyObject *text = PyObject_CallOneArg(state.nested, v);
    if (text == NULL)
        return -1;
    int done = -1;
    if (PyUnicode_CheckExact(text) && PyUnicode_IS_ASCII(text))
        done = put(w, (const char *)PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text));
    Py_DECREF(text);
    return done;
}

/* (end - start, 0.0 when negative) / (output_length - 1): the mean inter-token latency; None
   when fewer than 2 tokens or either time is None (the Python printer's order of tests). */
static int
put_per_token(Writer *w, PyObject *obj, Step *step)
{
    PyObject *count = get(obj, state.output_length, &state.output_length_slot);
    if (count == NULL)
        return -1;
    int overflow = 0;
    long long n = PyLong_CheckExact(count) ? PyLong_AsLongLongAndOverflow(count, &overflow) : 0;
    int exact = PyLong_CheckExact(count) && !overflow && !(n == -1 && PyErr_Occurred());
    Py_DECREF(count);
    if (!exact)
        return -1;
    if (n < 2)
        return put(w, "null", 4);
    if (n - 1 > (1LL << 53))  /* not exact as a double: Python's division is left to it */
        return -1;
    PyObject *end = get(obj, step->name, &step->slot);
    PyObject *start = end == NULL ? NULL : get(obj, step->name2, &step->slot2);
    int done = -1;
    double x;
    if (start != NULL) {
        if (end == Py_None || start == Py_None)
            done = put(w, "null", 4);
        else if (span(end, start, &x) == 0)
            done = put_double(w, x / (double)(n - 1));
    }
    Py_XDECREF(end);
    Py_XDECREF(start);
    return done;
}

static int
step_value(Writer *w, PyObject *obj, Step *step)
{
    if (step->op == OP_PER_TOKEN)
        return put_per_token(w, obj, step);
    PyObject *v = get(obj, step->name, &step->slot);
    if (v == NULL)
        return -1;
    int done = -1;
    switch (step->op) {
    case OP_FLOAT:
        done = put_float(w, v);
        break;
    case OP_INT:
        done = put_int(w, v);
        break;
    case OP_STR:
        done = put_str(w, v);
        break;
    case OP_BOOL:
        done = put_bool(w, v);
        break;
    case OP_UUID:
        done = put_uuid(w, v);
        break;
    case OP_OR_NONE:
        done = PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) == 0 ? put(w, "null", 4)
                                                                      : put_str(w, v);
        break;
    case OP_COUNT:
        done = PyList_CheckExact(v) ? put_whole(w, PyList_GET_SIZE(v), 0, "", 0) : -1;
        break;
    case OP_SPAN: {
        if (v == Py_None) {
            done = put(w, "null", 4);
            break;
        }
        PyObject *start = get(obj, step->name2, &step->slot2);
        double x;
        if (start != NULL && span(v, start, &x) == 0)
            done = put_double(w, x);
        Py_XDECREF(start);
        break;
    }
    case OP_NESTED:
        done = put_nested(w, v);
        break;
    case OP_ADMISSIONS:
    case OP_ROUTES:
        done = put_history(w, v, step->op == OP_ADMISSIONS);
        break;
    }
    Py_DECREF(v);
    return done;
}

static int
run(Writer *w, PyObject *obj, Plan *plan)
{
    for (Py_ssize_t i = 0; i < plan->size; i++) {
        Step *step = &plan->steps[i];
        if (put(w, step->piece, step->piece_size) < 0 || step_value(w, obj, step) < 0)
            return -1;
    }
    return put(w, plan->tail, plan->tail_size);
}

/* 1 when the attribute is set (not None), 0 when None, -1 when it cannot be read. */
static int
is_set(PyObject *obj, PyObject *name, Slot *slot)
{
    PyObject *v = get(obj, name, slot);
    if (v == NULL)
        return -1;
    int set = v != Py_None;
    Py_DECREF(v);
    return set;
}

static PyObject *
row(PyObject *module, PyObject *record)
{
    if (!state.ready) {
        PyErr_SetString(PyExc_RuntimeError, "_rowtext.row() before configure()");
        return NULL;
    }
    int agentic = is_set(record, state.agentic, &state.agentic_slot);
    int phase = agentic < 0 ? -1 : is_set(record, state.agentic_phase, &state.phase_slot);
    int host = phase < 0 ? -1 : is_set(record, state.host, &state.host_slot);
    Writer w;
    w.data = w.stack;
    w.size = 0;
    w.capacity = sizeof w.stack;
    PyObject *text = NULL;
    if (host >= 0 && run(&w, record, &state.rows[agentic * 4 + phase * 2 + host]) == 0) {
        text = PyUnicode_New(w.size, 127);
        if (text != NULL)
            memcpy(PyUnicode_1BYTE_DATA(text), w.data, w.size);
    }
    if (w.data != w.stack)
        PyMem_Free(w.data);
    if (text != NULL)
        return text;
    PyErr_Clear();  /* whatever went wrong, the Python printer meets it again and says it */
    Py_RETURN_NONE;
}

/* ASCII text of a bytes object, borrowed from it. */
static int
ascii_bytes(PyObject *v, const char **text, Py_ssize_t *size)
{
    if (!PyBytes_CheckExact(v)) {
        PyErr_SetString(PyExc_TypeError, "_rowtext: a piece of fixed text must be bytes");
        return -1;
    }
    *text = PyBytes_AS_STRING(v);
    *size = PyBytes_GET_SIZE(v);
    for (Py_ssize_t i = 0; i < *size; i++)
        if ((unsigned char)(*text)[i] > 127) {
            PyErr_SetString(PyExc_ValueError, "_rowtext: the fixed text must be ASCII");
            return -1;
        }
    return 0;
}

static int
name_or_null(PyObject *v, PyObject **name)
{
    if (v == Py_None) {
        *name = NULL;
        return 0;
    }
    if (!PyUnicode_CheckExact(v)) {
        PyErr_SetString(PyExc_TypeError, "_rowtext: an attribute name must be a str or None");
        return -1;
    }
    *name = v;
    return 0;
}

/* A plan from ((piece, op, name, name2), ...), tail. */
static int
read_plan(PyObject *spec, Plan *plan)
{
    PyObject *steps, *tail;
    if (!PyArg_ParseTuple(spec, "O!S:plan", &PyTuple_Type, &steps, &tail))
        return -1;
    if (ascii_bytes(tail, &plan->tail, &plan->tail_size) < 0)
        return -1;
    plan->size = PyTuple_GET_SIZE(steps);
    plan->steps = PyMem_Calloc(plan->size ? plan->size : 1, sizeof(Step));
    if (plan->steps == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < plan->size; i++) {
        Step *step = &plan->steps[i];
        PyObject *piece, *name, *name2;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(steps, i), "SiOO:step", &piece, &step->op, &name,
                              &name2))
            return -1;
        if (ascii_bytes(piece, &step->piece, &step->piece_size) < 0
                || name_or_null(name, &step->name) < 0 || name_or_null(name2, &step->name2) < 0)
            return -1;
        if (step->op < 0 || step->op >= OP_COUNT_OF_OPS || step->name == NULL
                || ((step->op == OP_SPAN || step->op == OP_PER_TOKEN) && step->name2 == NULL)) {
            PyErr_Format(PyExc_ValueError, "_rowtext: step %zd of a plan is malformed", i);
            return -1;
        }
    }
    return 0;
}

static void
free_plan(Plan *plan)
{
    PyMem_Free(plan->steps);
    plan->steps = NULL;
    plan->size = 0;
}

static void
reset(void)
{
    for (int i = 0; i < SHAPES; i++)
        free_plan(&state.rows[i]);
    free_plan(&state.admission_plain);
    free_plan(&state.admission_split);
    free_plan(&state.route);
    Py_CLEAR(state.keep);
    memset(&state.agentic_slot, 0, sizeof(Slot));
    memset(&state.phase_slot, 0, sizeof(Slot));
    memset(&state.host_slot, 0, sizeof(Slot));
    memset(&state.g1_slot, 0, sizeof(Slot));
    memset(&state.output_length_slot, 0, sizeof(Slot));
    state.ready = 0;
}

/* configure(rows, admission_plain, admission_split, route, layout, nested, names): the plans of
   the 8 row shapes (index agentic*4 + phase*2 + host) and of the history entries, a history
   list's (open, separator, close), the printer of an agentic mapping, and the attribute names
   (agentic, agentic_phase, host flag, an admission's g1 count, output_length). */
static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *rows, *plain, *split, *route, *layout, *nested, *names;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO!:configure", &PyTuple_Type, &rows, &PyTuple_Type,
                          &plain, &PyTuple_Type, &split, &PyTuple_Type, &route, &PyTuple_Type,
                          &layout, &nested, &PyTuple_Type, &names))
        return NULL;
    reset();
    state.keep = Py_NewRef(args);
    if (PyTuple_GET_SIZE(rows) != SHAPES) {
        PyErr_SetString(PyExc_ValueError, "_rowtext: one plan per row shape (8) is needed");
        goto fail;
    }
    for (int i = 0; i < SHAPES; i++)
        if (read_plan(PyTuple_GET_ITEM(rows, i), &state.rows[i]) < 0)
            goto fail;
    if (read_plan(plain, &state.admission_plain) < 0 || read_plan(split, &state.admission_split) < 0
            || read_plan(route, &state.route) < 0)
        goto fail;
    PyObject *open, *separator, *close;
    if (!PyArg_ParseTuple(layout, "SSS:layout", &open, &separator, &close)
            || ascii_bytes(open, &state.open, &state.open_size) < 0
            || ascii_bytes(separator, &state.separator, &state.separator_size) < 0
            || ascii_bytes(close, &state.close, &state.close_size) < 0)
        goto fail;
    if (!PyCallable_Check(nested)) {
        PyErr_SetString(PyExc_TypeError, "_rowtext: nested must be callable");
        goto fail;
    }
    state.nested = nested;
    if (!PyArg_ParseTuple(names, "UUUUU:names", &state.agentic, &state.agentic_phase, &state.host,
                          &state.g1, &state.output_length))
        goto fail;
    state.ready = 1;
    Py_RETURN_NONE;
fail:
    reset();
    return NULL;
}

static PyMethodDef methods[] = {
    {"row", row, METH_O,
     "row(record): the record's row as the report prints it, or None (print it in Python)."},
    {"configure", configure, METH_VARARGS,
     "configure(rows, admission_plain, admission_split, route, layout, nested, names)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_rowtext", "Report rows printed in C (engine/row_text.py decides).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__rowtext(void)
{
    return PyModule_Create(&module_def);
}
