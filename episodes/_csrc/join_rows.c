/* join_rows: to_numpy's stacking of equal-shaped rows, one byte copy per row. */
#include "speedups.h"


PyObject *
episodes_join_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "join_rows(items: list, out: writable array)");
        return NULL;
    }
    PyObject *items = args[0], *out = args[1];
    Py_ssize_t n = PyList_GET_SIZE(items);
    Py_buffer target;
    if (PyObject_GetBuffer(out, &target, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    /* Plain numbers only: object arrays hold references that a byte copy must not duplicate. */
    if (n == 0 || target.len % n != 0 || target.format == NULL || strlen(target.format) != 1 ||
        strchr("?bBhHiIlLqQefdg", target.format[0]) == NULL) {
        PyBuffer_Release(&target);
        Py_RETURN_FALSE;
    }
    Py_ssize_t row_bytes = target.len / n;
    char *dest = target.buf;
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *row = PyList_GET_ITEM(items, i);
        Py_buffer view;
        if (!Py_IS_TYPE(row, S.ndarray_type) ||
            PyObject_GetBuffer(row, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        /* Same element code, same shape as out's rows: the bytes are the values. */
        ok = view.len == row_bytes && view.format != NULL && strcmp(view.format, target.format) == 0 &&
             view.ndim == target.ndim - 1;
        for (int d = 0; ok && d < view.ndim; d++) {
            ok = view.shape[d] == target.shape[d + 1];
        }
        if (ok) {
            memcpy(dest + i * row_bytes, view.buf, row_bytes);
        }
        PyBuffer_Release(&view);
    }
    PyBuffer_Release(&target);
    return PyBool_FromLong(ok);
}

