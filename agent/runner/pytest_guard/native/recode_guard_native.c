/* The guard's watch below Python, for CPython 3.10 to 3.13 (built per interpreter by agent/runner/native.py).
 *
 * Two things Python code cannot do cheaply:
 *
 * - Judge every write to a module's attributes without changing the module's class. A guarded subclass of
 *   ``module`` would do it, but CPython specialises ``m.x`` only on modules whose type is exactly ``module``:
 *   every attribute load of the tested code (``torch.matmul``, ``math.sqrt``) would take the slow path. Here the
 *   ``module`` type's own setattr slot (and that of its subclasses) calls the guard's judge first, then writes.
 *   Its ``__setattr__``/``__delattr__`` descriptors are pointed at the same slot, so ``super().__setattr__`` in a
 *   module subclass is judged too, and ``object.__setattr__`` on a module is refused by CPython itself (it will
 *   not apply a base's setattr past a type that overrides it).
 * - Tell which of thousands of namespaces changed since they were last seen: every change of a dict bumps its
 *   version tag (PEP 509), so one pass in C compares a tag per namespace instead of every value.
 * - Walk a stack to the first frame that may be the candidate's: an audited event deep inside a library's
 *   import has some eighty frames below it, each the namespace of a known library module.
 * - Pass the guard's audit hook only the events it has rules for: a torch test fires about a hundred thousand
 *   events (``builtins.id`` alone half of them), each a call into Python for a hook that would return at once.
 *   Of those, only the ones that can concern the candidate: the guard says, per event, whether that needs a
 *   frame of the stack that may be the candidate's (the libraries a test imports open, compile and load
 *   thousands of files with none), or the one that fired it. It is handed the frame that fired the event, never
 *   for what it does itself, and only once activate() was called: a gate Python code cannot close again.
 * - Keep the guard's own functions' globals and closures (its rules, baselines and switches) for the guard.
 * - Gate ``frame.f_locals``, so the candidate may hold frames without reaching the test's locals, and the
 *   globals ``types.FunctionType`` is given, which no audit event names.
 * - Raise audit events for what ctypes does to memory without one: calling a foreign function, dereferencing a
 *   pointer (slots of extension types Python code cannot replace).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>  /* T_OBJECT_EX */
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>  /* the frame's fields and PyFrame_GetBack, public from 3.11 */
#endif

#if PY_VERSION_HEX < 0x030A0000 || PY_VERSION_HEX >= 0x030E0000
#error "recode_guard_native reads dict version tags: CPython 3.10 to 3.13 only"
#endif

/* deprecated in 3.12 (dict watchers replace it) but still bumped on every change of the dict */
#define VERSION_TAG(d) (((PyDictObject *)(d))->ma_version_tag)

/* Whether ``item`` is one of the tuple's items (by identity): the namespaces the guard hands over are few. */
static int in_tuple(PyObject *tuple, PyObject *item)
{
    for (Py_ssize_t i = 0; tuple != NULL && i < PyTuple_GET_SIZE(tuple); i++)
        if (PyTuple_GET_ITEM(tuple, i) == item)
            return 1;
    return 0;
}

static setattrofunc plain_setattro;  /* module's own slot: the write itself, once judged */
static PyObject *judge;              /* judge(module, name, value or DELETING, writing frame or None) -> whether the
                                      * baseline follows */
static PyObject *accept;             /* accept(module, name): called after a write the judge let the baseline follow */
static PyObject *deleting;           /* stands for the value of a ``del`` */
static PyObject *watched;            /* the guard's watched namespaces by owner: a write there is accepted */
static PyObject *trusted;            /* tuple of the import system's globals: its writes need no judging */

static int guarded_setattro(PyObject *module, PyObject *name, PyObject *value);

static void guard_type(PyTypeObject *type)
{
    if (type->tp_setattro == plain_setattro)
        type->tp_setattro = guarded_setattro;
}

/* The common writes, decided without calling into Python: the module's own code, or the import system binding
 * a submodule to its package. The judge decides these the same way; it is asked about the rest. */
static int plainly_allowed(PyObject *module)
{
    PyObject *globals = PyEval_GetGlobals();  /* the writing code's (borrowed), NULL when no Python code runs */
    if (globals == NULL)
        return 0;
    return globals == PyModule_GetDict(module) || in_tuple(trusted, globals);
}

static int freely_allowed(PyObject *module, PyObject *name);

static int guarded_setattro(PyObject *module, PyObject *name, PyObject *value)
{
    int follow, free = freely_allowed(module, name);
    if (free < 0)
        return -1;
    if (free || plainly_allowed(module)) {
        follow = PyDict_Contains(watched, module);
    } else {
        PyFrameObject *writer = PyEval_GetFrame();  /* borrowed: the judge need not ask (an audited event) */
        PyObject *verdict = PyObject_CallFunctionObjArgs(judge, module, name, value ? value : deleting,
                                                         writer ? (PyObject *)writer : Py_None, NULL);
        if (verdict == NULL)
            return -1;
        follow = PyObject_IsTrue(verdict);
        Py_DECREF(verdict);
    }
    if (follow < 0)
        return -1;
    if (plain_setattro(module, name, value) < 0)
        return -1;
    guard_type(Py_TYPE(module));  /* re-classed (``trio``, torch's config modules): its new class is guarded too */
    if (follow) {
        PyObject *done = PyObject_CallFunctionObjArgs(accept, module, name, NULL);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
    }
    return 0;
}

/* The dict of a static type (not tp_dict on 3.12+), a new reference. */
static PyObject *static_type_dict(PyTypeObject *type)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyType_GetDict(type);
#else
    return Py_NewRef(type->tp_dict);
#endif
}

#if PY_VERSION_HEX >= 0x030D0000
/* From 3.13, module has no ``__setattr__``/``__delattr__`` of its own and CPython applies object's to a module
 * (``object.__setattr__(numpy, ...)``) past module's slot. Object's wrappers call this instead: a module's write
 * is judged, anyone else's is the generic write. Classes made later take their slot from these wrappers, so
 * their attribute stores are not specialised by the interpreter (classes that exist when the helper is
 * installed keep theirs). */
static int object_setattro(PyObject *object, PyObject *name, PyObject *value)
{
    return PyModule_Check(object) ? guarded_setattro(object, name, value) : plain_setattro(object, name, value);
}
#endif

/* ``module.__setattr__``/``__delattr__``, which ``super().__setattr__`` in a module subclass finds, call the guarded
 * slot: up to 3.12 module's own slot wrappers are pointed at it; from 3.13 object's, which module inherits, are
 * pointed at object_setattro. */
static int point_descriptor(const char *name)
{
    PyObject *own = static_type_dict(&PyModule_Type);
    if (own == NULL)
        return -1;
    PyObject *descriptor = PyDict_GetItemString(own, name);
#if PY_VERSION_HEX >= 0x030D0000
    void *replacement = (void *)object_setattro;
    PyObject *inherited = static_type_dict(&PyBaseObject_Type);
    if (descriptor == NULL && inherited != NULL)
        descriptor = PyDict_GetItemString(inherited, name);
    Py_XDECREF(inherited);  /* the type keeps its dict, and the dict its descriptor */
#else
    void *replacement = (void *)guarded_setattro;
#endif
    Py_DECREF(own);
    int expected = descriptor != NULL && PyObject_TypeCheck(descriptor, &PyWrapperDescr_Type) &&
        ((PyWrapperDescrObject *)descriptor)->d_wrapped == (void *)plain_setattro;
    if (expected)
        ((PyWrapperDescrObject *)descriptor)->d_wrapped = replacement;
    else
        PyErr_Format(PyExc_RuntimeError, "module.%s is not the slot wrapper this helper expects", name);
    return expected ? 0 : -1;
}

static PyObject *install(PyObject *self, PyObject *args)
{
    PyObject *judge_, *accept_, *deleting_, *subclasses, *watched_, *trusted_;
    if (!PyArg_ParseTuple(args, "OOOO!O!O!", &judge_, &accept_, &deleting_, &PyList_Type, &subclasses,
                          &PyDict_Type, &watched_, &PyTuple_Type, &trusted_))
        return NULL;
    if (judge != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the module write guard is installed once per process");
        return NULL;
    }
    if (PyModule_Type.tp_setattro != PyObject_GenericSetAttr) {
        PyErr_SetString(PyExc_RuntimeError, "module's setattr slot is not CPython's generic one");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subclasses); i++) {
        PyObject *kind = PyList_GET_ITEM(subclasses, i);
        if (!PyType_Check(kind) || !PyType_IsSubtype((PyTypeObject *)kind, &PyModule_Type)) {
            PyErr_SetString(PyExc_TypeError, "install() takes the subclasses of module");
            return NULL;
        }
    }
    plain_setattro = PyModule_Type.tp_setattro;
    if (point_descriptor("__setattr__") < 0 || point_descriptor("__delattr__") < 0)
        return NULL;
    judge = Py_NewRef(judge_);
    accept = Py_NewRef(accept_);
    deleting = Py_NewRef(deleting_);
    watched = Py_NewRef(watched_);
    trusted = Py_NewRef(trusted_);
    PyModule_Type.tp_setattro = guarded_setattro;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subclasses); i++)
        guard_type((PyTypeObject *)PyList_GET_ITEM(subclasses, i));
    Py_RETURN_NONE;
}

/* The dict behind a module or a class (a class's ``__dict__`` is a read-only proxy of it). */
static PyObject *namespace_of(PyObject *owner)
{
    if (PyType_Check(owner))
        return ((PyTypeObject *)owner)->tp_dict;
    if (PyModule_Check(owner))
        return PyModule_GetDict(owner);
    return NULL;
}

static int version_of(PyObject *owner, unsigned long long *tag)
{
    /* a namespace itself (namespaces()): one memory read less per item of a pass over thousands */
    PyObject *namespace = PyDict_Check(owner) ? owner : namespace_of(owner);
    if (namespace == NULL || !PyDict_Check(namespace)) {
        PyErr_SetString(PyExc_TypeError, "a module or a class with a dict namespace is expected");
        return -1;
    }
    *tag = (unsigned long long)VERSION_TAG(namespace);
    return 0;
}

static PyObject *version(PyObject *self, PyObject *owner)
{
    unsigned long long tag;
    if (version_of(owner, &tag) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(tag);
}

/* after(container, kept): what a list holds, or a dict's keys and values in turn, past a start that is ``kept``'s
 * elements (compared by identity), as a new list; None when it does not start with them. Rule 14's walk looks
 * only at what joined a container it found fixed before, and a test re-checking a growing dict at every step
 * (emoji's names seen so far) would otherwise copy and compare all of it in Python each time. The builtin
 * storage is read: no code of a subclass runs, and appending to a list allocates no tracked object (no GC). */
static PyObject *after(PyObject *self, PyObject *args)
{
    PyObject *container, *kept, *key, *value, *rest;
    Py_ssize_t known, position = 0, i = 0;
    if (!PyArg_ParseTuple(args, "OO!:after", &container, &PyList_Type, &kept))
        return NULL;
    known = PyList_GET_SIZE(kept);
    if (PyList_Check(container)) {
        if (PyList_GET_SIZE(container) < known)
            Py_RETURN_NONE;
        for (; i < known; i++)
            if (PyList_GET_ITEM(container, i) != PyList_GET_ITEM(kept, i))
                Py_RETURN_NONE;
        return PyList_GetSlice(container, known, PyList_GET_SIZE(container));
    }
    if (!PyDict_Check(container)) {
        PyErr_SetString(PyExc_TypeError, "a list or a dict is expected");
        return NULL;
    }
    rest = PyList_New(0);
    if (rest == NULL)
        return NULL;
    while (PyDict_Next(container, &position, &key, &value)) {
        if (i + 1 < known) {
            if (PyList_GET_ITEM(kept, i) != key || PyList_GET_ITEM(kept, i + 1) != value) {
                Py_DECREF(rest);
                Py_RETURN_NONE;
            }
        } else if (i < known || PyList_Append(rest, key) < 0 || PyList_Append(rest, value) < 0) {
            Py_DECREF(rest);
            if (i < known)  /* an odd number kept: not a dict's */
                Py_RETURN_NONE;
            return NULL;
        }
        i += 2;
    }
    if (i < known) {
        Py_DECREF(rest);
        Py_RETURN_NONE;
    }
    return rest;
}

/* stale(containers, states): whether a dict's version tag is no longer its state (an int), or a list no longer
 * holds exactly the elements of its state (a list, compared by identity): what a container rule 14's walk kept
 * as fixed rests on, one pass in C (emoji's test draws from a list of thousands of (emoji, dict) pairs). */
static PyObject *stale(PyObject *self, PyObject *args)
{
    PyObject *containers, *states, *container, *state;
    Py_ssize_t i, j, size;
    if (!PyArg_ParseTuple(args, "O!O!:stale", &PyList_Type, &containers, &PyList_Type, &states))
        return NULL;
    if (PyList_GET_SIZE(states) != PyList_GET_SIZE(containers)) {
        PyErr_SetString(PyExc_ValueError, "one state per container is expected");
        return NULL;
    }
    for (i = 0; i < PyList_GET_SIZE(containers); i++) {
        container = PyList_GET_ITEM(containers, i);
        state = PyList_GET_ITEM(states, i);
        if (PyDict_Check(container) && PyLong_Check(state)) {
            unsigned long long tag = PyLong_AsUnsignedLongLong(state);
            if (tag == (unsigned long long)-1 && PyErr_Occurred())
                return NULL;
            if (tag != (unsigned long long)VERSION_TAG(container))
                Py_RETURN_TRUE;
        } else if (PyList_Check(container) && PyList_Check(state)) {
            size = PyList_GET_SIZE(state);
            if (PyList_GET_SIZE(container) != size)
                Py_RETURN_TRUE;
            for (j = 0; j < size; j++)
                if (PyList_GET_ITEM(container, j) != PyList_GET_ITEM(state, j))
                    Py_RETURN_TRUE;
        } else {
            PyErr_SetString(PyExc_TypeError, "a dict with an int or a list with a list is expected");
            return NULL;
        }
    }
    Py_RETURN_FALSE;
}

/* namespaces(owners): the dict behind each module or class, for changed() to read without the owner. */
static PyObject *namespaces(PyObject *self, PyObject *owners)
{
    if (!PyList_Check(owners)) {
        PyErr_SetString(PyExc_TypeError, "namespaces() takes a list");
        return NULL;
    }
    PyObject *found = PyList_New(0);
    for (Py_ssize_t i = 0; found != NULL && i < PyList_GET_SIZE(owners); i++) {
        PyObject *namespace = namespace_of(PyList_GET_ITEM(owners, i));
        if (namespace == NULL || !PyDict_Check(namespace)) {
            PyErr_SetString(PyExc_TypeError, "a module or a class with a dict namespace is expected");
            Py_CLEAR(found);
        } else if (PyList_Append(found, namespace) < 0) {
            Py_CLEAR(found);
        }
    }
    return found;
}

/* slot_values(objects, descriptors): the value of each slot (a member descriptor of the objects' class) of each
 * object, flattened, read at its offset without an attribute lookup (None when empty): pluggy's hook
 * implementations keep their function and flags in slots, and the guard compares some thousand of them before
 * every test. A TypeError when an object is not exactly of the descriptors' class. */
static PyObject *slot_values(PyObject *self, PyObject *args)
{
    PyObject *objects, *descriptors;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &objects, &PyTuple_Type, &descriptors))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(objects), width = PyTuple_GET_SIZE(descriptors);
    for (Py_ssize_t j = 0; j < width; j++) {
        PyObject *descriptor = PyTuple_GET_ITEM(descriptors, j);
        if (!Py_IS_TYPE(descriptor, &PyMemberDescr_Type) ||
                ((PyMemberDescrObject *)descriptor)->d_member->type != T_OBJECT_EX ||
                ((PyDescrObject *)descriptor)->d_type != ((PyDescrObject *)PyTuple_GET_ITEM(descriptors, 0))->d_type) {
            PyErr_SetString(PyExc_TypeError, "slot_values() takes object slots of one class");
            return NULL;
        }
    }
    PyObject *found = PyList_New(count * width);
    for (Py_ssize_t i = 0; found != NULL && i < count; i++) {
        PyObject *object = PyList_GET_ITEM(objects, i);
        for (Py_ssize_t j = 0; j < width; j++) {
            PyMemberDescrObject *descriptor = (PyMemberDescrObject *)PyTuple_GET_ITEM(descriptors, j);
            if ((PyObject *)Py_TYPE(object) != (PyObject *)descriptor->d_common.d_type) {
                PyErr_SetString(PyExc_TypeError, "slot_values() takes objects of the descriptors' class");
                Py_CLEAR(found);
                break;
            }
            PyObject *value = *(PyObject **)((char *)object + descriptor->d_member->offset);
            PyList_SET_ITEM(found, i * width + j, Py_NewRef(value != NULL ? value : Py_None));
        }
    }
    return found;
}

/* changed(owners, tags): positions whose namespace's tag is no longer the one in ``tags`` (an array('Q')). */
static PyObject *changed(PyObject *self, PyObject *args)
{
    PyObject *owners, *tags;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &owners, &tags))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(tags, &view, PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *found = NULL;
    Py_ssize_t count = PyList_GET_SIZE(owners);
    if (view.itemsize != sizeof(unsigned long long) || view.format == NULL || strcmp(view.format, "Q") != 0 ||
            view.len / view.itemsize != count) {
        PyErr_SetString(PyExc_ValueError, "tags must be an array('Q') as long as owners");
        goto done;
    }
    const unsigned long long *seen = (const unsigned long long *)view.buf;
    found = PyList_New(0);
    if (found == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        unsigned long long tag;
        if (version_of(PyList_GET_ITEM(owners, i), &tag) < 0) {
            Py_CLEAR(found);
            goto done;
        }
        if (tag != seen[i]) {
            PyObject *position = PyLong_FromSsize_t(i);
            if (position == NULL || PyList_Append(found, position) < 0) {
                Py_XDECREF(position);
                Py_CLEAR(found);
                goto done;
            }
            Py_DECREF(position);
        }
    }
done:
    PyBuffer_Release(&view);
    return found;
}

static PyObject *frame_globals(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetGlobals(frame);
#else
    return Py_NewRef(frame->f_globals);
#endif
}

/* suspect(frame, candidates, known): the innermost frame at or below ``frame`` whose globals are one of the
 * ``candidates`` namespaces (a tuple) or not a namespace of ``known`` (the namespaces of library modules, keyed
 * by their address as the guard noted them); None when every frame runs in a known library namespace. */
/* Namespaces found in ``known`` lately, by address: a stack repeats the same few library modules, and a known
 * namespace stays known (``known`` keeps it alive), so a hit needs no lookup. Reset when ``known`` is another. */
#define SEEN_SLOTS 512
static PyObject *seen_known[SEEN_SLOTS];
static PyObject *seen_for;

static int is_known(PyObject *globals, PyObject *known)
{
    size_t slot = ((size_t)globals >> 6) % SEEN_SLOTS;
    if (seen_for != known) {
        memset(seen_known, 0, sizeof(seen_known));
        Py_XSETREF(seen_for, Py_NewRef(known));  /* held: no other dict can take its address */
    }
    if (seen_known[slot] == globals)
        return 1;
    PyObject *key = PyLong_FromVoidPtr(globals);
    if (key == NULL)
        return -1;
    PyObject *noted = PyDict_GetItemWithError(known, key);
    Py_DECREF(key);
    if (noted == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (noted != globals)
        return 0;
    seen_known[slot] = globals;
    return 1;
}

/* Whether a frame running with ``globals`` may be the candidate's: one of the ``candidates`` namespaces, or not a
 * namespace of ``known``. 1, 0, or -1 with an exception set. */
static int may_be_candidate(PyObject *globals, PyObject *candidates, PyObject *known)
{
    if (in_tuple(candidates, globals))
        return 1;
    int noted = is_known(globals, known);
    return noted < 0 ? -1 : !noted;
}

/* The innermost frame at or below ``start`` (a new reference) that may be the candidate's; NULL with no exception
 * set when there is none. */
static PyFrameObject *first_suspect(PyFrameObject *start, PyObject *candidates, PyObject *known)
{
    PyFrameObject *frame = (PyFrameObject *)Py_XNewRef(start);
    while (frame != NULL) {
        PyObject *globals = frame_globals(frame);
        int found = may_be_candidate(globals, candidates, known);
        Py_DECREF(globals);
        if (found != 0) {
            if (found < 0)
                Py_CLEAR(frame);
            return frame;
        }
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    return NULL;
}

static PyObject *suspect(PyObject *self, PyObject *args)
{
    PyObject *start, *candidates, *known;
    if (!PyArg_ParseTuple(args, "OO!O!", &start, &PyTuple_Type, &candidates, &PyDict_Type, &known))
        return NULL;
    if (start == Py_None)
        Py_RETURN_NONE;
    if (!PyFrame_Check(start)) {
        PyErr_SetString(PyExc_TypeError, "suspect() takes a frame");
        return NULL;
    }
    PyFrameObject *found = first_suspect((PyFrameObject *)start, candidates, known);
    if (found == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return (PyObject *)found;
}

/* Writes the guard allows whoever is on the stack, decided here as its ``_plainly_allowed`` decides them (set by
 * allow_writes()): a free name of one module (``sys.stdout``, which pytest's capture swaps a dozen times a test),
 * or a library writing a module of its own package (pytest's assertion plugin, before each test) from a
 * namespace known to be a library's. 1, 0 (the judge decides), or -1 with an exception set. */
static PyObject *free_module;      /* the module whose ``free_names`` anyone may write (sys) */
static PyObject *free_names;       /* a frozenset of attribute names */
static PyObject *free_candidates;  /* a list whose item 0 is the tuple of the candidate's namespaces */
static PyObject *free_known;       /* the known library namespaces, as for suspect() */
static PyObject *name_key;         /* "__name__", interned */

static PyObject *package_of(PyObject *namespace)
{
    PyObject *name = PyDict_GetItemWithError(namespace, name_key);  /* borrowed */
    if (name == NULL || !PyUnicode_Check(name))
        return NULL;
    Py_ssize_t dot = PyUnicode_FindChar(name, '.', 0, PyUnicode_GET_LENGTH(name), 1);
    if (dot == -2)
        return NULL;
    return PyUnicode_Substring(name, 0, dot < 0 ? PyUnicode_GET_LENGTH(name) : dot);
}

static int same_package(PyObject *writer, PyObject *namespace)
{
    PyObject *mine = package_of(writer);
    PyObject *theirs = mine != NULL ? package_of(namespace) : NULL;
    int same = theirs != NULL && PyUnicode_Compare(mine, theirs) == 0;
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    return PyErr_Occurred() ? -1 : same;
}

static int freely_allowed(PyObject *module, PyObject *name)
{
    if (free_names == NULL || !PyModule_Check(module))
        return 0;
    if (module == free_module && PyUnicode_CheckExact(name)) {
        int listed = PySet_Contains(free_names, name);
        if (listed != 0)
            return listed;
    }
    PyObject *globals = PyEval_GetGlobals();  /* the writing code's (borrowed) */
    PyObject *namespace = PyModule_GetDict(module);
    if (PyErr_Occurred() || globals == NULL || namespace == NULL || !PyDict_Check(globals))
        return PyErr_Occurred() ? -1 : 0;
    int candidate = may_be_candidate(globals, PyList_GET_ITEM(free_candidates, 0), free_known);
    return candidate != 0 ? (candidate < 0 ? -1 : 0) : same_package(globals, namespace);
}

static PyObject *allow_writes(PyObject *self, PyObject *args)
{
    PyObject *module, *names, *candidates, *known;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyModule_Type, &module, &PyFrozenSet_Type, &names, &PyList_Type,
                          &candidates, &PyDict_Type, &known))
        return NULL;
    if (free_names != NULL || PyList_GET_SIZE(candidates) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "allow_writes() is called once, with the candidates as a one-item list");
        return NULL;
    }
    name_key = PyUnicode_InternFromString("__name__");
    if (name_key == NULL)
        return NULL;
    free_candidates = Py_NewRef(candidates);
    free_known = Py_NewRef(known);
    free_module = Py_NewRef(module);
    free_names = Py_NewRef(names);
    Py_RETURN_NONE;
}

/* own_classes(namespace, module_name): the classes a module's namespace holds that it defines (``__module__`` is its
 * name) and that can change (heap types, not immutable): one pass where torch's ~1,300 namespaces hold some
 * hundred thousand values. */
static PyObject *module_key;  /* "__module__", interned */

static PyObject *own_classes(PyObject *namespace, PyObject *module_name)
{
    PyObject *found = PyList_New(0);
    PyObject *value;
    Py_ssize_t position = 0;
    while (found != NULL && PyDict_Next(namespace, &position, NULL, &value)) {
        if (!PyType_Check(value))
            continue;
        PyTypeObject *type = (PyTypeObject *)value;
        if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || (type->tp_flags & Py_TPFLAGS_IMMUTABLETYPE) ||
                type->tp_dict == NULL)
            continue;
        PyObject *owner = PyDict_GetItemWithError(type->tp_dict, module_key);
        if (owner == NULL) {
            if (PyErr_Occurred())
                Py_CLEAR(found);
            continue;
        }
        Py_INCREF(value);
        Py_INCREF(owner);
        int same = owner == module_name ? 1 : PyObject_RichCompareBool(owner, module_name, Py_EQ);
        Py_DECREF(owner);
        if (same < 0 || (same == 1 && PyList_Append(found, value) < 0))
            Py_CLEAR(found);
        Py_DECREF(value);
    }
    return found;
}

/* adopt_classes(namespace, module_name, positions, owners, tags, bases): the baseline of each class own_classes()
 * finds that ``positions`` does not hold yet, appended where the guard keeps them: its position, the class,
 * its dict's version tag (read first: a change while copying shows) and a copy of its dict. How many were added. */
static int adopt_class(PyObject *type, PyObject *positions, PyObject *owners, PyObject *tags, PyObject *bases)
{
    PyObject *position = PyLong_FromSsize_t(PyList_GET_SIZE(owners));
    PyObject *tag = PyLong_FromUnsignedLongLong((unsigned long long)VERSION_TAG(((PyTypeObject *)type)->tp_dict));
    PyObject *base = PyDict_Copy(((PyTypeObject *)type)->tp_dict);
    PyObject *done = position && tag && base ? PyObject_CallMethod(tags, "append", "O", tag) : NULL;
    int rc = done != NULL && PyDict_SetItem(positions, type, position) == 0 && PyList_Append(owners, type) == 0 &&
        PyList_Append(bases, base) == 0 ? 0 : -1;
    Py_XDECREF(done);
    Py_XDECREF(base);
    Py_XDECREF(tag);
    Py_XDECREF(position);
    return rc;
}

static PyObject *adopt_classes(PyObject *self, PyObject *args)
{
    PyObject *namespace, *module_name, *positions, *owners, *tags, *bases;
    if (!PyArg_ParseTuple(args, "O!OO!O!OO!", &PyDict_Type, &namespace, &module_name, &PyDict_Type, &positions,
                          &PyList_Type, &owners, &tags, &PyList_Type, &bases))
        return NULL;
    PyObject *found = own_classes(namespace, module_name);
    if (found == NULL)
        return NULL;
    Py_ssize_t added = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(found); i++) {
        PyObject *type = PyList_GET_ITEM(found, i);
        int known = PyDict_Contains(positions, type);
        if (known < 0 || (!known && adopt_class(type, positions, owners, tags, bases) < 0)) {
            Py_DECREF(found);
            return NULL;
        }
        added += !known;
    }
    Py_DECREF(found);
    return PyLong_FromSsize_t(added);
}

static PyObject *key(PyObject *self, PyObject *namespace)
{
    return PyLong_FromVoidPtr(namespace);
}

static PyObject *audit_hook;        /* the guard's hook(event, args, frame) */
static PyObject *audit_events;      /* names of the events it has rules for (those of ``ctypes.`` always) */
static PyObject *audit_attributes;  /* event -> the attribute names that matter, for events fired per attribute */
static PyObject *audit_when;        /* event -> when it can concern the candidate at all (WHEN_*); absent: always */
static PyObject *audit_candidates;  /* a list whose item 0 is the tuple of the candidate's namespaces */
static PyObject *audit_known;       /* the known library namespaces, as for suspect() */
static unsigned long main_thread;   /* the test process's main thread: the candidate's threads are others */
enum { WHEN_ON_STACK = 1, WHEN_TRIGGER = 2, WHEN_OUTSIDE_IMPORT_SYSTEM = 3 };
static int active;                  /* a candidate module exists (activate()): never unset again */
static __thread int in_hook;        /* this thread runs the hook: what the hook itself does is not audited */

static int wanted(PyObject *name, PyObject *args)
{
    int known = PySet_Contains(audit_events, name);
    if (known != 1)
        return known;
    PyObject *attributes = PyDict_GetItemWithError(audit_attributes, name);
    if (attributes == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 2)
        return 0;
    int matters = PySet_Contains(attributes, PyTuple_GET_ITEM(args, 1));
    if (matters < 0) {
        PyErr_Clear();  /* not a name: not one of those attributes */
        return 0;
    }
    return matters;
}

/* Whether the event, fired by ``frame`` in the main thread, can concern the candidate, by the policy the guard
 * gave for it: some frame of the stack may be the candidate's; the frame that fired it may be; or it is not the
 * import system's doing. 1, 0, or -1 with an exception set. */
static int concerns_candidate(PyObject *name, PyFrameObject *frame)
{
    PyObject *when = PyDict_GetItemWithError(audit_when, name);
    if (when == NULL || frame == NULL || PyThread_get_thread_ident() != main_thread)
        return PyErr_Occurred() ? -1 : 1;
    long policy = PyLong_AsLong(when);
    PyObject *candidates = PyList_GET_ITEM(audit_candidates, 0);
    if (policy == WHEN_ON_STACK) {
        PyFrameObject *found = first_suspect(frame, candidates, audit_known);
        int any = found != NULL;
        Py_XDECREF(found);
        return any ? 1 : PyErr_Occurred() ? -1 : 0;
    }
    PyObject *globals = frame_globals(frame);
    int concerns = 1;
    if (policy == WHEN_TRIGGER)
        concerns = may_be_candidate(globals, candidates, audit_known);
    else if (policy == WHEN_OUTSIDE_IMPORT_SYSTEM)
        concerns = !in_tuple(trusted, globals);
    Py_DECREF(globals);
    return concerns;
}

static int audit(const char *event, PyObject *args, void *unused)
{
    if (in_hook || !active)
        return 0;
    PyObject *name = PyUnicode_FromString(event);
    if (name == NULL)
        return -1;
    int call = strncmp(event, "ctypes.", 7) == 0 ? 1 : wanted(name, args);
    int rc = call < 0 ? -1 : 0;
    if (call == 1) {
        /* the frame that fired the event: the hook need not ask (sys._getframe is itself an audited event) */
        PyFrameObject *frame = PyEval_GetFrame();
        in_hook = 1;
        int concerns = concerns_candidate(name, frame);
        PyObject *done = concerns == 1 ? PyObject_CallFunctionObjArgs(audit_hook, name, args,
                                                                      frame ? (PyObject *)frame : Py_None, NULL) : NULL;
        in_hook = 0;
        rc = concerns < 0 || (concerns == 1 && done == NULL) ? -1 : 0;
        Py_XDECREF(done);
    }
    Py_DECREF(name);
    return rc;
}

static PyObject *add_audit_hook(PyObject *self, PyObject *args)
{
    PyObject *hook, *events, *attributes, *when, *candidates, *known;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!", &hook, &PyFrozenSet_Type, &events, &PyDict_Type, &attributes,
                          &PyDict_Type, &when, &PyList_Type, &candidates, &PyDict_Type, &known))
        return NULL;
    if (audit_hook != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the guard's audit hook is added once per process");
        return NULL;
    }
    if (PyList_GET_SIZE(candidates) != 1 || !PyTuple_Check(PyList_GET_ITEM(candidates, 0))) {
        PyErr_SetString(PyExc_TypeError, "add_audit_hook() takes the candidates as a list holding one tuple");
        return NULL;
    }
    audit_hook = Py_NewRef(hook);
    audit_events = Py_NewRef(events);
    audit_attributes = PyDict_Copy(attributes);
    audit_when = PyDict_Copy(when);
    audit_candidates = Py_NewRef(candidates);
    audit_known = Py_NewRef(known);
    main_thread = PyThread_get_thread_ident();
    if (audit_attributes == NULL || audit_when == NULL || PySys_AddAuditHook(audit, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *activate(PyObject *self, PyObject *unused)
{
    active = 1;
    Py_RETURN_NONE;
}

/* The guard's own functions keep what the verdict depends on in their globals and closures (its rules, its
 * baselines, whether it is active). Python code reaches a function's globals through ``__globals__``, unaudited,
 * and the guard's functions are reachable (the import system's wrappers, pytest's hooks): those three
 * attributes of the function type are replaced by getters that ask ``refuse`` before handing a guard function's
 * to code outside the guard. */
static PyObject *guard_spaces;  /* tuple of the guard's module namespaces */
static PyObject *refuse;        /* refuse(function, attribute) -> whether the reader may have it */
static const char *shielded_names[] = {"__globals__", "__closure__", "__builtins__"};


static PyObject *shielded_get(PyObject *function, void *which)
{
    PyFunctionObject *f = (PyFunctionObject *)function;
    Py_ssize_t index = (Py_ssize_t)which;
    PyObject *value = index == 0 ? f->func_globals : index == 1 ? f->func_closure : f->func_builtins;
    if (in_tuple(guard_spaces, f->func_globals) && !in_tuple(guard_spaces, PyEval_GetGlobals())) {
        PyObject *verdict = PyObject_CallFunction(refuse, "Os", function, shielded_names[index]);
        if (verdict == NULL)
            return NULL;
        int allowed = PyObject_IsTrue(verdict);
        Py_DECREF(verdict);
        if (allowed < 0)
            return NULL;
        if (!allowed) {
            PyErr_Format(PyExc_PermissionError, "%s of the guard's functions is not readable",
                         shielded_names[index]);
            return NULL;
        }
    }
    return Py_NewRef(value != NULL ? value : Py_None);
}

static PyGetSetDef shielded_getsets[] = {
    {"__globals__", shielded_get, NULL, NULL, (void *)0},
    {"__closure__", shielded_get, NULL, NULL, (void *)1},
    {"__builtins__", shielded_get, NULL, NULL, (void *)2},
    {NULL},
};

static PyObject *shield(PyObject *self, PyObject *args)
{
    PyObject *spaces, *refuse_;
    if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &spaces, &refuse_))
        return NULL;
    if (guard_spaces != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the guard's functions are shielded once per process");
        return NULL;
    }
    PyObject *dict = static_type_dict(&PyFunction_Type);
    if (dict == NULL)
        return NULL;
    for (PyGetSetDef *getset = shielded_getsets; getset->name != NULL; getset++) {
        PyObject *descriptor = PyDescr_NewGetSet(&PyFunction_Type, getset);
        if (descriptor == NULL || PyDict_SetItemString(dict, getset->name, descriptor) < 0) {
            Py_XDECREF(descriptor);
            Py_DECREF(dict);
            return NULL;
        }
        Py_DECREF(descriptor);
    }
    Py_DECREF(dict);
    PyType_Modified(&PyFunction_Type);
    guard_spaces = Py_NewRef(spaces);
    refuse = Py_NewRef(refuse_);
    Py_RETURN_NONE;
}

/* ``frame.f_locals`` of a frame not in the candidate's namespaces, read while a frame that may be the candidate's
 * is on the stack (reading it, or below a library reading it for the candidate): the guard's refuse_frame(frame)
 * decides (it raises to refuse). So the candidate may hold any frame, its callers' included (a module name from
 * ``f_globals``, a line number), but never reach the locals of the test's functions. */
static PyObject *gate_candidates;  /* a list whose item 0 is the tuple of the candidate's namespaces */
static PyObject *gate_known;       /* the known library namespaces, as for suspect() */
static PyObject *gate_refuse;      /* refuse_frame(frame) */
static getter plain_f_locals;
static void *plain_f_locals_closure;

static PyObject *gated_f_locals(PyObject *frame, void *unused)
{
    if (active && !in_hook) {
        PyObject *candidates = PyList_GET_ITEM(gate_candidates, 0);
        PyObject *globals = frame_globals((PyFrameObject *)frame);
        int own = in_tuple(candidates, globals);
        Py_DECREF(globals);
        PyFrameObject *suspect = own ? NULL : first_suspect(PyEval_GetFrame(), candidates, gate_known);
        if (suspect == NULL && PyErr_Occurred())
            return NULL;
        if (suspect != NULL) {
            Py_DECREF(suspect);
            PyObject *verdict = PyObject_CallOneArg(gate_refuse, frame);
            if (verdict == NULL)
                return NULL;
            Py_DECREF(verdict);
        }
    }
    return plain_f_locals(frame, plain_f_locals_closure);
}

static PyGetSetDef gated_getsets[] = {
    {"f_locals", gated_f_locals, NULL, NULL, NULL},
    {NULL},
};

static PyObject *gate_frames(PyObject *self, PyObject *args)
{
    PyObject *candidates, *known, *refuse_;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &candidates, &PyDict_Type, &known, &refuse_))
        return NULL;
    if (gate_refuse != NULL || PyList_GET_SIZE(candidates) < 1) {
        PyErr_SetString(PyExc_RuntimeError, "frames are gated once per process, with the candidates' list");
        return NULL;
    }
    PyObject *dict = static_type_dict(&PyFrame_Type);
    if (dict == NULL)
        return NULL;
    PyObject *plain = PyDict_GetItemString(dict, "f_locals");
    if (plain == NULL || !PyObject_TypeCheck(plain, &PyGetSetDescr_Type)) {
        Py_DECREF(dict);
        PyErr_SetString(PyExc_RuntimeError, "frame.f_locals is not the getset this helper expects");
        return NULL;
    }
    plain_f_locals = ((PyGetSetDescrObject *)plain)->d_getset->get;
    plain_f_locals_closure = ((PyGetSetDescrObject *)plain)->d_getset->closure;
    PyObject *descriptor = PyDescr_NewGetSet(&PyFrame_Type, gated_getsets);
    int failed = descriptor == NULL || PyDict_SetItemString(dict, "f_locals", descriptor) < 0;
    Py_XDECREF(descriptor);
    Py_DECREF(dict);
    if (failed)
        return NULL;
    PyType_Modified(&PyFrame_Type);
    gate_candidates = Py_NewRef(candidates);
    gate_known = Py_NewRef(known);
    gate_refuse = Py_NewRef(refuse_);
    Py_RETURN_NONE;
}

/* ``types.FunctionType(code, globals, ...)``: the audit event names the code only. Where the globals are a known
 * namespace that is not the candidate's (a library's, the test's), the guard's refuse_function(code, globals)
 * decides first (it raises to refuse): code of the candidate's run there would not be seen as its own. */
static newfunc plain_function_new;
static PyObject *function_refuse;  /* refuse_function(code, globals) */

static PyObject *guarded_function_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *globals = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 1 ? PyTuple_GET_ITEM(args, 1) : NULL;
    if (globals == NULL && kwargs != NULL)
        globals = PyDict_GetItemString(kwargs, "globals");
    if (active && !in_hook && globals != NULL && PyDict_Check(globals) && gate_candidates != NULL &&
            !in_tuple(PyList_GET_ITEM(gate_candidates, 0), globals)) {
        int known = is_known(globals, gate_known);
        if (known < 0)
            return NULL;
        if (known) {
            PyObject *code = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0) : Py_None;
            PyObject *verdict = PyObject_CallFunctionObjArgs(function_refuse, code, globals, NULL);
            if (verdict == NULL)
                return NULL;
            Py_DECREF(verdict);
        }
    }
    return plain_function_new(type, args, kwargs);
}

static PyObject *gate_functions(PyObject *self, PyObject *refuse_)
{
    if (function_refuse != NULL || gate_candidates == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "functions are gated once per process, after gate_frames()");
        return NULL;
    }
    plain_function_new = PyFunction_Type.tp_new;
    function_refuse = Py_NewRef(refuse_);
    PyFunction_Type.tp_new = guarded_function_new;
    Py_RETURN_NONE;
}

/* ctypes reaches memory with no audit event: a foreign function's call (``memmove``, ``memset``, ``cast``,
 * ``pythonapi.*``; CPython 3.10-3.13 raise ``ctypes.call_function`` only in ``_ctypes.call_function``) and a
 * pointer's dereference (``p.contents``, ``p[i]``), a write anywhere once the pointer's address was set as an
 * integer (a union with an integer) or indexed past its object. gate_ctypes() points those slots at functions that
 * raise an event first, ``ctypes.call_function`` (the function's address and arguments, as ``_ctypes`` does) and
 * ``ctypes.dereference`` (the pointer), for the guard's rule of ``ctypes.*`` events to judge by the frame that made
 * it: in the base types, in their subclasses that exist (one per foreign signature and library) and, inherited, in
 * those made later; and in the bases' slot wrappers (``_CFuncPtr.__call__(f)``, ``_Pointer.__getitem__(p, 0)``). */
static ternaryfunc plain_call;
static ssizeargfunc plain_item;
static ssizeobjargproc plain_ass_item;
static binaryfunc plain_subscript;
static getter plain_contents;
static PyGetSetDef audited_getsets[2];

static PyObject *audited_call(PyObject *function, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t address = 0;  /* a foreign function's buffer holds its address */
    Py_buffer view;
    if (PyObject_GetBuffer(function, &view, PyBUF_SIMPLE) < 0)
        PyErr_Clear();
    else {
        if (view.len >= (Py_ssize_t)sizeof(void *))
            memcpy(&address, view.buf, sizeof(void *));
        PyBuffer_Release(&view);
    }
    return PySys_Audit("ctypes.call_function", "nO", address, args) < 0 ? NULL : plain_call(function, args, kwargs);
}

static PyObject *audited_item(PyObject *pointer, Py_ssize_t index)
{
    return PySys_Audit("ctypes.dereference", "O", pointer) < 0 ? NULL : plain_item(pointer, index);
}

static int audited_ass_item(PyObject *pointer, Py_ssize_t index, PyObject *value)
{
    return PySys_Audit("ctypes.dereference", "O", pointer) < 0 ? -1 : plain_ass_item(pointer, index, value);
}

static PyObject *audited_subscript(PyObject *pointer, PyObject *key)
{
    return PySys_Audit("ctypes.dereference", "O", pointer) < 0 ? NULL : plain_subscript(pointer, key);
}

static PyObject *audited_contents(PyObject *pointer, void *closure)
{
    return PySys_Audit("ctypes.dereference", "O", pointer) < 0 ? NULL : plain_contents(pointer, closure);
}

/* Each slot still the plain one (a class may define its own ``__call__``) becomes the audited one. */
static void audit_slots(PyTypeObject *type)
{
    if (type->tp_call == plain_call)
        type->tp_call = audited_call;
    PySequenceMethods *sequence = type->tp_as_sequence;
    if (sequence != NULL && sequence->sq_item == plain_item)
        sequence->sq_item = audited_item;
    if (sequence != NULL && sequence->sq_ass_item == plain_ass_item)
        sequence->sq_ass_item = audited_ass_item;
    if (type->tp_as_mapping != NULL && type->tp_as_mapping->mp_subscript == plain_subscript)
        type->tp_as_mapping->mp_subscript = audited_subscript;
}

static int audit_type_and_subclasses(PyTypeObject *type)
{
    audit_slots(type);
    PyObject *subclasses = PyObject_CallMethod((PyObject *)type, "__subclasses__", NULL);
    Py_ssize_t count = subclasses == NULL ? -1 : PyList_GET_SIZE(subclasses);
    for (Py_ssize_t i = 0; i < count; i++)
        if (audit_type_and_subclasses((PyTypeObject *)PyList_GET_ITEM(subclasses, i)) < 0)
            count = -1;
    Py_XDECREF(subclasses);
    return count < 0 ? -1 : 0;
}

/* The base's own slot wrappers call the slot function they were made for, not the type's slot. */
static void audit_wrappers(PyObject *dict)
{
    void *plain[] = {(void *)plain_call, (void *)plain_item, (void *)plain_ass_item, (void *)plain_subscript};
    void *audited[] = {(void *)audited_call, (void *)audited_item, (void *)audited_ass_item, (void *)audited_subscript};
    Py_ssize_t position = 0;
    PyObject *name, *descriptor;
    while (PyDict_Next(dict, &position, &name, &descriptor))
        for (int i = 0; i < 4 && PyObject_TypeCheck(descriptor, &PyWrapperDescr_Type); i++)
            if (((PyWrapperDescrObject *)descriptor)->d_wrapped == plain[i])
                ((PyWrapperDescrObject *)descriptor)->d_wrapped = audited[i];
}

static PyObject *gate_ctypes(PyObject *self, PyObject *unused)
{
    PyObject *ctypes = plain_contents != NULL ? NULL : PyImport_ImportModule("_ctypes");
    PyObject *function = ctypes == NULL ? NULL : PyObject_GetAttrString(ctypes, "CFuncPtr");
    PyObject *pointer = function == NULL ? NULL : PyObject_GetAttrString(ctypes, "_Pointer");
    PyObject *dict = pointer == NULL ? NULL : static_type_dict((PyTypeObject *)pointer);
    PyObject *contents = dict == NULL ? NULL : PyDict_GetItemString(dict, "contents");
    PyObject *done = NULL;
    if (contents != NULL && PyType_Check(function) && PyType_Check(pointer) &&
            PyObject_TypeCheck(contents, &PyGetSetDescr_Type)) {
        PyTypeObject *pointer_type = (PyTypeObject *)pointer;
        plain_call = ((PyTypeObject *)function)->tp_call;
        plain_item = pointer_type->tp_as_sequence->sq_item;
        plain_ass_item = pointer_type->tp_as_sequence->sq_ass_item;
        plain_subscript = pointer_type->tp_as_mapping->mp_subscript;
        audited_getsets[0] = *((PyGetSetDescrObject *)contents)->d_getset;
        plain_contents = audited_getsets[0].get;
        audited_getsets[0].get = audited_contents;
        PyObject *descriptor = PyDescr_NewGetSet(pointer_type, audited_getsets);
        PyObject *function_dict = static_type_dict((PyTypeObject *)function);
        if (descriptor != NULL && function_dict != NULL && PyDict_SetItemString(dict, "contents", descriptor) == 0 &&
                audit_type_and_subclasses((PyTypeObject *)function) == 0 &&
                audit_type_and_subclasses(pointer_type) == 0) {
            audit_wrappers(function_dict);
            audit_wrappers(dict);
            PyType_Modified(pointer_type);
            done = Py_NewRef(Py_None);
        }
        Py_XDECREF(descriptor);
        Py_XDECREF(function_dict);
    }
    else if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "ctypes is gated once, and its types must be the ones this helper expects");
    Py_XDECREF(dict);
    Py_XDECREF(pointer);
    Py_XDECREF(function);
    Py_XDECREF(ctypes);
    return done;
}

/* Builtins of the module the instrumented test module imports its guard calls from, each calling one of the
 * guard's functions: a library walking the test's functions and the globals they name (dill's ``source``) skips
 * builtins and meets no guard function (nor, through ``__self__``, one whose closure or globals it would read), and
 * pickling one finds it by its module and name, as pickling the function did. */
#define FORWARDS 7
static PyObject *forward_targets[FORWARDS];
static PyObject *forward_names[FORWARDS];
/* What the first ``passing`` forwarders return at once, without calling the guard: a value whose class (a plain
 * ``type``, whose hash runs no code) maps to ``leaf`` in ``kinds``, the guard's answer for it that never changes.
 * A test's arithmetic loop hands millions of ints and floats to ``check`` and ``operand``. */
static PyObject *forward_kinds, *forward_leaf;
static Py_ssize_t forward_passing;

static int forward_passes(Py_ssize_t i, PyObject *const *args, Py_ssize_t nargs)
{
    if (i >= forward_passing || nargs != 1 || !PyType_CheckExact((PyObject *)Py_TYPE(Py_TYPE(args[0]))))
        return 0;
    PyObject *kind = PyDict_GetItemWithError(forward_kinds, (PyObject *)Py_TYPE(args[0]));
    if (kind == NULL)
        PyErr_Clear();
    return kind == forward_leaf;
}

#define FORWARD(i) \
    static PyObject *forward_##i(PyObject *module, PyObject *const *args, Py_ssize_t nargs) \
    { return forward_passes(i, args, nargs) ? Py_NewRef(args[0]) : \
             PyObject_Vectorcall(forward_targets[i], args, nargs, NULL); }
FORWARD(0) FORWARD(1) FORWARD(2) FORWARD(3) FORWARD(4) FORWARD(5) FORWARD(6)

static PyMethodDef forward_definitions[FORWARDS] = {
    {NULL, (PyCFunction)(void (*)(void))forward_0, METH_FASTCALL, NULL},
    {NULL, (PyCFunction)(void (*)(void))forward_1, METH_FASTCALL, NULL},
    {NULL, (PyCFunction)(void (*)(void))forward_2, METH_FASTCALL, NULL},
    {NULL, (PyCFunction)(void (*)(void))forward_3, METH_FASTCALL, NULL},
    {NULL, (PyCFunction)(void (*)(void))forward_4, METH_FASTCALL, NULL},
    {NULL, (PyCFunction)(void (*)(void))forward_5, METH_FASTCALL, NULL},
    {NULL, (PyCFunction)(void (*)(void))forward_6, METH_FASTCALL, NULL},
};

static PyObject *forwarders(PyObject *self, PyObject *args)
{
    PyObject *module, *functions, *kinds, *leaf;
    Py_ssize_t passing;
    if (!PyArg_ParseTuple(args, "O!O!O!On", &PyModule_Type, &module, &PyTuple_Type, &functions, &PyDict_Type,
                          &kinds, &leaf, &passing))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(functions);
    if (count > FORWARDS || forward_targets[0] != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "forwarders() makes at most seven builtins, once per process");
        return NULL;
    }
    forward_kinds = Py_NewRef(kinds);
    forward_leaf = Py_NewRef(leaf);
    forward_passing = passing;
    PyObject *module_name = PyModule_GetNameObject(module);
    PyObject *made = module_name == NULL ? NULL : PyTuple_New(count);
    for (Py_ssize_t i = 0; made != NULL && i < count; i++) {
        PyObject *target = PyTuple_GET_ITEM(functions, i);
        forward_names[i] = PyObject_GetAttrString(target, "__name__");
        const char *name = forward_names[i] == NULL ? NULL : PyUnicode_AsUTF8(forward_names[i]);
        PyObject *builtin = NULL;
        if (name != NULL) {
            forward_definitions[i].ml_name = name;
            forward_targets[i] = Py_NewRef(target);
            builtin = PyCFunction_NewEx(&forward_definitions[i], module, module_name);
        }
        if (builtin == NULL)
            Py_CLEAR(made);
        else
            PyTuple_SET_ITEM(made, i, builtin);
    }
    Py_XDECREF(module_name);
    return made;
}

static PyMethodDef methods[] = {
    {"install", install, METH_VARARGS,
     "install(judge, accept, deleting, subclasses, watched, trusted): judge(module, name, value, writing frame) "
     "every module attribute write from now on (once)."},
    {"allow_writes", allow_writes, METH_VARARGS,
     "allow_writes(module, names, candidates, known): module writes decided without the judge from now on: one of "
     "the names of that module, or a write from a known library namespace to a module of its own package (once)."},
    {"version", version, METH_O, "version(owner): the version tag of a module's or a class's namespace."},
    {"changed", changed, METH_VARARGS,
     "changed(owners, tags): positions of the owners (or namespaces) whose namespace tag differs from tags "
     "(array('Q'))."},
    {"slot_values", slot_values, METH_VARARGS,
     "slot_values(objects, descriptors): each object's value of each slot (member descriptors of its exact class), "
     "flattened; None for an empty slot."},
    {"namespaces", namespaces, METH_O, "namespaces(owners): the dict behind each module or class of a list."},
    {"stale", stale, METH_VARARGS,
     "stale(containers, states): whether a dict's tag differs from its state (an int) or a list's elements from "
     "its state (a list, by identity)."},
    {"after", after, METH_VARARGS,
     "after(container, kept): a list's elements, or a dict's keys and values in turn, past a start identical to "
     "kept's, as a new list; None when it does not start so."},
    {"suspect", suspect, METH_VARARGS,
     "suspect(frame, candidates, known): the innermost frame that may be the candidate's, or None."},
    {"add_audit_hook", add_audit_hook, METH_VARARGS,
     "add_audit_hook(hook, events, attributes, when, candidates, known): hook(event, args, frame) for those events "
     "only, when they can concern the candidate (when: event -> 1 a frame of the stack may be its, 2 the frame "
     "that fired it may be, 3 it is not the import system's; other threads' events always), once activate() was "
     "called, and not for what the hook itself does (once; never removed)."},
    {"activate", activate, METH_NOARGS, "activate(): the audit hook is called from now on (it cannot be undone)."},
    {"shield", shield, METH_VARARGS,
     "shield(namespaces, refuse): __globals__, __closure__ and __builtins__ of a function whose globals are one "
     "of namespaces, read by code whose globals are not, are handed out only if refuse(function, name) is true."},
    {"adopt_classes", adopt_classes, METH_VARARGS,
     "adopt_classes(namespace, module_name, positions, owners, tags, bases): append the baseline of each mutable "
     "heap class the namespace holds whose __module__ is the name, not in positions yet (position, class, "
     "version tag, copy of its dict); how many."},
    {"forwarders", forwarders, METH_VARARGS,
     "forwarders(module, functions, kinds, leaf, passing): for each function (at most seven), a builtin of module "
     "under the function's name that calls it, except that each of the first passing returns its one argument "
     "at once when kinds maps its class (a plain type) to leaf (once)."},
    {"gate_ctypes", gate_ctypes, METH_NOARGS,
     "gate_ctypes(): a foreign function's call and a pointer's dereference raise the audit events "
     "ctypes.call_function and ctypes.dereference first (once)."},
    {"key", key, METH_O, "key(namespace): the key of a namespace in suspect()'s known."},
    {"gate_functions", gate_functions, METH_O,
     "gate_functions(refuse): types.FunctionType(code, globals) with globals a known namespace not the candidate's "
     "asks refuse(code, globals) first (once, after gate_frames)."},
    {"gate_frames", gate_frames, METH_VARARGS,
     "gate_frames(candidates, known, refuse): frame.f_locals of a frame not in the candidate's namespaces, read "
     "while a frame that may be the candidate's is on the stack, asks refuse(frame) first (once)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "recode_guard_native", "The guard's watch below Python (see its source).", -1, methods,
};

PyMODINIT_FUNC PyInit_recode_guard_native(void)
{
    module_key = PyUnicode_InternFromString("__module__");
    return module_key == NULL ? NULL : PyModule_Create(&definition);
}
