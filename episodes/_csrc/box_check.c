/* BoxCheck: item -> bool for a Box of a few elements, reading the array's buffer. */
#include "speedups.h"


typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    char format;       /* struct-module code of the space's dtype */
    Py_ssize_t ndim;
    Py_ssize_t shape[8];
    Py_ssize_t size;
    int uniform;       /* one bound pair for every element */
    double *low, *high;
    PyObject *fallback; /* the Python checker, for every input this does not read itself */
} BoxCheck;

static void
boxcheck_dealloc(BoxCheck *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->fallback);
    PyMem_Free(self->low);
    PyMem_Free(self->high);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
boxcheck_traverse(BoxCheck *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    return 0;
}

static inline int
read_element(const char *data, char format, double *out)
{
#define READ_AS(ctype)              \
    do {                            \
        ctype value_;               \
        memcpy(&value_, data, sizeof value_); \
        *out = (double)value_;      \
        return 1;                   \
    } while (0)
    switch (format) {
    case 'f': READ_AS(float);
    case 'd': READ_AS(double);
    case 'b': READ_AS(signed char);
    case 'B': READ_AS(unsigned char);
    case 'h': READ_AS(short);
    case 'H': READ_AS(unsigned short);
    case 'i': READ_AS(int);
    case 'I': READ_AS(unsigned int);
    default: return 0; /* 64-bit integers do not fit a double exactly: Python decides */
    }
#undef READ_AS
}

static PyObject *
boxcheck_call(BoxCheck *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a checker takes exactly one item");
        return NULL;
    }
    PyObject *item = args[0];
    if (!S.ndarray_type || !Py_IS_TYPE(item, S.ndarray_type)) {
        return PyObject_CallOneArg(self->fallback, item);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(item, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return PyObject_CallOneArg(self->fallback, item);
    }
    int simple = view.format != NULL && view.format[0] == self->format && view.format[1] == '\0' &&
                 view.ndim == self->ndim;
    for (Py_ssize_t d = 0; simple && d < view.ndim; d++) {
        simple = view.shape[d] == self->shape[d];
    }
    if (!simple) {
        PyBuffer_Release(&view);
        return PyObject_CallOneArg(self->fallback, item);
    }
    const char *data = view.buf;
    Py_ssize_t step = view.itemsize;
    int inside = 1;
    for (Py_ssize_t i = 0; i < self->size; i++) {
        double value = 0.0;
        read_element(data + i * step, self->format, &value);
        Py_ssize_t b = self->uniform ? 0 : i;
        /* Written so that NaN fails, as in gymnasium. */
        if (!(self->low[b] <= value && value <= self->high[b])) {
            inside = 0;
            break;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(inside);
}

static PyObject *
boxcheck_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"format", "shape", "low", "high", "fallback", NULL};
    const char *format;
    PyObject *shape, *low, *high, *fallback;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO!O!O!O:BoxCheck", names, &format,
                                     &PyTuple_Type, &shape, &PyTuple_Type, &low, &PyTuple_Type,
                                     &high, &fallback)) {
        return NULL;
    }
    double probe;
    char zero[8] = {0};
    if (strlen(format) != 1 || !read_element(zero, format[0], &probe)) {
        PyErr_Format(PyExc_ValueError, "unsupported element format '%s'", format);
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape), size = 1;
    if (ndim < 1 || ndim > 8) {
        PyErr_SetString(PyExc_ValueError, "shape must have 1 to 8 dimensions");
        return NULL;
    }
    Py_ssize_t dims[8];
    for (Py_ssize_t d = 0; d < ndim; d++) {
        dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (dims[d] < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "negative dimension");
            }
            return NULL;
        }
        size *= dims[d];
    }
    Py_ssize_t nbounds = PyTuple_GET_SIZE(low);
    if (PyTuple_GET_SIZE(high) != nbounds || (nbounds != 1 && nbounds != size)) {
        PyErr_SetString(PyExc_ValueError, "low and high need one bound or one per element");
        return NULL;
    }
    BoxCheck *self = (BoxCheck *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = (vectorcallfunc)boxcheck_call;
    self->format = format[0];
    self->ndim = ndim;
    memcpy(self->shape, dims, sizeof(dims));
    self->size = size;
    self->uniform = nbounds == 1;
    self->low = PyMem_Malloc((nbounds ? nbounds : 1) * sizeof(double));
    self->high = PyMem_Malloc((nbounds ? nbounds : 1) * sizeof(double));
    self->fallback = Py_NewRef(fallback);
    if (self->low == NULL || self->high == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nbounds; i++) {
        self->low[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(low, i));
        self->high[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(high, i));
    }
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

PyTypeObject episodes_BoxCheckType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "episodes._speedups.BoxCheck",
    .tp_basicsize = sizeof(BoxCheck),
    .tp_dealloc = (destructor)boxcheck_dealloc,
    .tp_vectorcall_offset = offsetof(BoxCheck, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "BoxCheck(format, shape, low, high, fallback): item -> bool for a small Box.",
    .tp_traverse = (traverseproc)boxcheck_traverse,
    .tp_new = boxcheck_new,
};

