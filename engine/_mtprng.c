/* The reference's MTP random stream in C: Rust rand's StdRng (ChaCha12, seed_from_u64's PCG32
   key expansion), u64 draws, and one verification's accepted draft positions. The same words as
   engine/mtp_rng.py's PyStdRng, which documents the construction; tests/engine/test_mtp_rng.py
   pins both to the reference's draws. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    uint32_t key[8];
    uint64_t counter;
    uint64_t draws[8];
    int next; /* index of the next draw in `draws`; 8: empty */
} StdRngObject;

#define ROTL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))
#define QR(a, b, c, d)                          \
    a += b; d ^= a; d = ROTL(d, 16);            \
    c += d; b ^= c; b = ROTL(b, 12);            \
    a += b; d ^= a; d = ROTL(d, 8);             \
    c += d; b ^= c; b = ROTL(b, 7);

static void
refill(StdRngObject *self)
{
    uint32_t j[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
    uint32_t x[16];
    int i;
    for (i = 0; i < 8; i++)
        j[4 + i] = self->key[i];
    j[12] = (uint32_t)self->counter;
    j[13] = (uint32_t)(self->counter >> 32);
    j[14] = 0;
    j[15] = 0;
    for (i = 0; i < 16; i++)
        x[i] = j[i];
    for (i = 0; i < 6; i++) {
        QR(x[0], x[4], x[8], x[12]);
        QR(x[1], x[5], x[9], x[13]);
        QR(x[2], x[6], x[10], x[14]);
        QR(x[3], x[7], x[11], x[15]);
        QR(x[0], x[5], x[10], x[15]);
        QR(x[1], x[6], x[11], x[12]);
        QR(x[2], x[7], x[8], x[13]);
        QR(x[3], x[4], x[9], x[14]);
    }
    for (i = 0; i < 16; i++)
        x[i] += j[i];
    for (i = 0; i < 8; i++)
        self->draws[i] = (uint64_t)x[2 * i] | ((uint64_t)x[2 * i + 1] << 32);
    self->counter++;
    self->next = 0;
}

static inline uint64_t
next_u64(StdRngObject *self)
{
    if (self->next >= 8)
        refill(self);
    return self->draws[self->next++];
}

static int
StdRng_init(StdRngObject *self, PyObject *args, PyObject *kwds)
{
    unsigned long long seed;
    uint64_t state;
    int i;
    if (!PyArg_ParseTuple(args, "K", &seed))
        return -1;
    state = (uint64_t)seed;
    for (i = 0; i < 8; i++) {
        uint32_t xorshifted, rot;
        state = state * 6364136223846793005ULL + 11634580027462260723ULL;
        xorshifted = (uint32_t)(((state >> 18) ^ state) >> 27);
        rot = (uint32_t)(state >> 59);
        self->key[i] = (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
    }
    self->counter = 0;
    self->next = 8;
    return 0;
}

static PyObject *
StdRng_next_u64(StdRngObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(next_u64(self));
}

static PyObject *
StdRng_accepted(StdRngObject *self, PyObject *thresholds)
{
    Py_ssize_t n, i;
    if (!PyTuple_Check(thresholds)) {
        PyErr_SetString(PyExc_TypeError, "thresholds must be a tuple");
        return NULL;
    }
    n = PyTuple_GET_SIZE(thresholds);
    for (i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(thresholds, i);
        unsigned long long limit;
        if (item == Py_None)
            continue;
        limit = PyLong_AsUnsignedLongLong(item);
        if (limit == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
        if (!(next_u64(self) < limit))
            break;
    }
    return PyLong_FromSsize_t(i);
}

/* `count` verifications in a row: their accepted counts as bytes (a stretch's draws at once). */
static PyObject *
StdRng_accepted_many(StdRngObject *self, PyObject *args)
{
    PyObject *thresholds, *out;
    Py_ssize_t count, n, i, k;
    unsigned long long limits[8];
    int draws[8];
    char *buf;
    if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &thresholds, &count))
        return NULL;
    n = PyTuple_GET_SIZE(thresholds);
    if (n > 8 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "at most 8 thresholds, and a count >= 0");
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(thresholds, i);
        draws[i] = item != Py_None;
        limits[i] = 0;
        if (draws[i]) {
            limits[i] = PyLong_AsUnsignedLongLong(item);
            if (limits[i] == (unsigned long long)-1 && PyErr_Occurred())
                return NULL;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, count);
    if (out == NULL)
        return NULL;
    buf = PyBytes_AS_STRING(out);
    for (k = 0; k < count; k++) {
        for (i = 0; i < n; i++) {
            if (draws[i] && !(next_u64(self) < limits[i]))
                break;
        }
        buf[k] = (char)i;
    }
    return out;
}

static PyMethodDef StdRng_methods[] = {
    {"next_u64", (PyCFunction)StdRng_next_u64, METH_NOARGS, "The next u64 draw."},
    {"accepted", (PyCFunction)StdRng_accepted, METH_O,
     "Draft positions accepted in one verification (see mtp_rng.PyStdRng.accepted)."},
    {"accepted_many", (PyCFunction)StdRng_accepted_many, METH_VARARGS,
     "accepted() `count` times, as bytes (see mtp_rng.PyStdRng.accepted_many)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject StdRngType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kvreplay.engine._mtprng.StdRng",
    .tp_basicsize = sizeof(StdRngObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StdRng::seed_from_u64(seed) (ChaCha12), u64 draws.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)StdRng_init,
    .tp_methods = StdRng_methods,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_mtprng", "The reference's MTP random stream (ChaCha12 StdRng).", -1,
    NULL};

PyMODINIT_FUNC
PyInit__mtprng(void)
{
    PyObject *m;
    if (PyType_Ready(&StdRngType) < 0)
        return NULL;
    m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&StdRngType);
    if (PyModule_AddObject(m, "StdRng", (PyObject *)&StdRngType) < 0) {
        Py_DECREF(&StdRngType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
