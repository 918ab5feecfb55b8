/*
 * htr - Python bindings of libhtr (issue 39).
 *
 * A CPython extension over the public C API only (include/htr/).  numpy
 * and pandas are optional and imported at run time: the module builds
 * against Python's headers alone.  What is heavy (opening, analyses,
 * per-block columns, cursor batches, builds) runs with the GIL released.
 *
 * Lifetimes.  struct htr_file lives in a Handle object; everything that
 * points into the mapping (the zero-copy record arrays, blocks, cursors,
 * stores) holds a reference to it, so the mapping is unmapped only when
 * the last of them is gone.  File.close() drops the File's own use of
 * it: later calls on the File (and its Block objects) raise ValueError,
 * arrays taken before stay valid.
 *
 * Analyses.  One struct htr_store per sidecar per process (LMDB's rule,
 * htr/store.h): a registry maps the sidecar's path to its Store object
 * (weakly), and a Store keeps a pool of struct htr_analysis handles, one
 * taken per call, so several Python threads analyse one file at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <htr/htr.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Errors */

static PyObject *HtrError;      /* htr.Error(Exception) */
static PyObject *HtrCanceled;   /* htr.Canceled(htr.Error) */
static PyObject *glue;          /* the embedded Python helpers' dict */
static PyObject *stores;        /* sidecar path -> weakref to Store */

/* Raise htr.Error (htr.Canceled for HTR_ERR_CANCELED) with .code, .errstr
 * and .message: "MESSAGE" or the code's phrase when there is none. */
static PyObject *raise_htr(int code, const char *msg)
{
	PyObject *type = code == HTR_ERR_CANCELED ? HtrCanceled : HtrError;
	const char *es = htr_errstr(code);
	PyObject *exc, *v;

	if (!msg || !*msg)
		msg = es;
	exc = PyObject_CallFunction(type, "s", msg);
	if (!exc)
		return NULL;
	v = PyLong_FromLong(code);
	if (!v || PyObject_SetAttrString(exc, "code", v) < 0)
		goto fail;
	Py_DECREF(v);
	v = PyUnicode_FromString(es);
	if (!v || PyObject_SetAttrString(exc, "errstr", v) < 0)
		goto fail;
	Py_DECREF(v);
	v = PyUnicode_FromString(msg);
	if (!v || PyObject_SetAttrString(exc, "message", v) < 0)
		goto fail;
	Py_DECREF(v);
	PyErr_SetObject(type, exc);
	Py_DECREF(exc);
	return NULL;
fail:
	Py_XDECREF(v);
	Py_DECREF(exc);
	return NULL;
}

static PyObject *call_glue(const char *fn, const char *fmt, ...)
{
	PyObject *f = PyDict_GetItemString(glue, fn), *args, *r;
	va_list ap;

	if (!f)
		return PyErr_Format(PyExc_SystemError, "htr: no helper %s", fn);
	va_start(ap, fmt);
	args = Py_VaBuildValue(fmt, ap);
	va_end(ap);
	if (!args)
		return NULL;
	if (!PyTuple_Check(args)) {
		PyObject *t = PyTuple_Pack(1, args);

		Py_DECREF(args);
		if (!t)
			return NULL;
		args = t;
	}
	r = PyObject_CallObject(f, args);
	Py_DECREF(args);
	return r;
}

/* ------------------------------------------------------------------ */
/* Handle: owns the struct htr_file and the bytes it reads. */

typedef struct {
	PyObject_HEAD
	struct htr_file *f;
	void *mem;              /* aligned copy of the bytes, or NULL */
	PyObject *bytes;        /* bytes object read in place, or NULL */
} HandleObject;

static void Handle_dealloc(HandleObject *self)
{
	htr_file_close(self->f);
	free(self->mem);
	Py_XDECREF(self->bytes);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyTypeObject HandleType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr._Handle",
	.tp_basicsize = sizeof(HandleObject),
	.tp_dealloc = (destructor) Handle_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An open .htr mapping (internal).",
};

/* ------------------------------------------------------------------ */
/* Records: a read-only buffer over a section of the mapping. */

typedef struct {
	PyObject_HEAD
	HandleObject *h;
	const void *data;
	Py_ssize_t len;
} RecordsObject;

static int Records_getbuffer(RecordsObject *self, Py_buffer *view, int flags)
{
	static const char empty[8];

	return PyBuffer_FillInfo(view, (PyObject *) self,
				 (void *) (self->data ? self->data : empty),
				 self->len, 1, flags);
}

static void Records_dealloc(RecordsObject *self)
{
	Py_XDECREF(self->h);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyBufferProcs Records_as_buffer = {
	.bf_getbuffer = (getbufferproc) Records_getbuffer,
};

static PyTypeObject RecordsType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr._Records",
	.tp_basicsize = sizeof(RecordsObject),
	.tp_dealloc = (destructor) Records_dealloc,
	.tp_as_buffer = &Records_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Records of an .htr section, in place (read-only buffer).",
};

/* ------------------------------------------------------------------ */
/* Array: memory the module computed (a column), exported as a typed
 * buffer; numpy wraps it without copying. */

typedef struct {
	PyObject_HEAD
	void *data;
	Py_ssize_t n;           /* items */
	Py_ssize_t itemsize;
	char format[4];
} ArrayObject;

static int Array_getbuffer(ArrayObject *self, Py_buffer *view, int flags)
{
	static char empty[8];

	(void) flags;
	view->buf = self->data ? self->data : empty;
	view->obj = (PyObject *) self;
	Py_INCREF(self);
	view->len = self->n * self->itemsize;
	view->readonly = 0;
	view->itemsize = self->itemsize;
	view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
	view->ndim = 1;
	view->shape = (flags & PyBUF_ND) ? &self->n : NULL;
	view->strides = (flags & PyBUF_STRIDES) ? &self->itemsize : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	return 0;
}

static void Array_dealloc(ArrayObject *self)
{
	free(self->data);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyBufferProcs Array_as_buffer = {
	.bf_getbuffer = (getbufferproc) Array_getbuffer,
};

static PyTypeObject ArrayType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr._Array",
	.tp_basicsize = sizeof(ArrayObject),
	.tp_dealloc = (destructor) Array_dealloc,
	.tp_as_buffer = &Array_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A column the module computed (typed buffer).",
};

/* A numpy array (or a memoryview without numpy) over @data: @n items of
 * @fmt ("Q", "I", "B", "q"), taking ownership of @data (malloc'ed). */
static PyObject *wrap_array(void *data, size_t n, const char *fmt)
{
	ArrayObject *a = PyObject_New(ArrayObject, &ArrayType);
	PyObject *r;

	if (!a) {
		free(data);
		return NULL;
	}
	a->data = data;
	a->n = (Py_ssize_t) n;
	a->itemsize = fmt[0] == 'B' ? 1 : fmt[0] == 'I' ? 4 : 8;
	snprintf(a->format, sizeof(a->format), "%s", fmt);
	r = call_glue("_wrap", "(Os)", (PyObject *) a, fmt);
	Py_DECREF(a);
	return r;
}

static void *alloc_items(size_t n, size_t size)
{
	void *p = malloc(n ? n * size : 1);

	if (!p)
		PyErr_NoMemory();
	return p;
}

/* ------------------------------------------------------------------ */
/* Store: one struct htr_store per sidecar, a pool of analysis handles. */

typedef struct {
	PyObject_HEAD
	HandleObject *h;        /* the file the store borrows */
	struct htr_store *s;
	pthread_mutex_t mu;
	struct htr_analysis **pool;
	size_t npool, cap;
	unsigned npy;           /* Python analyzers registered on it */
	PyObject *weakrefs;
} StoreObject;

static void Store_dealloc(StoreObject *self)
{
	size_t i;

	if (self->weakrefs)
		PyObject_ClearWeakRefs((PyObject *) self);
	for (i = 0; i < self->npool; i++)
		htr_analysis_close(self->pool[i]);
	free(self->pool);
	htr_store_close(self->s);
	pthread_mutex_destroy(&self->mu);
	Py_XDECREF(self->h);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyTypeObject StoreType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr._Store",
	.tp_basicsize = sizeof(StoreObject),
	.tp_dealloc = (destructor) Store_dealloc,
	.tp_weaklistoffset = offsetof(StoreObject, weakrefs),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The sidecar store of an .htr file (internal).",
};

/* Take an analysis handle (GIL released).  On failure, the code, with
 * the message in @msg. */
static int store_take(StoreObject *st, struct htr_analysis **out, char *msg,
		      size_t msize)
{
	struct htr_analysis_opts ao;
	struct htr_analysis *a = NULL;
	int rc;

	pthread_mutex_lock(&st->mu);
	if (st->npool) {
		*out = st->pool[--st->npool];
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	pthread_mutex_unlock(&st->mu);
	htr_analysis_opts_init(&ao);
	ao.analyzers = HTR_ANALYZE_ALL;
	rc = htr_analysis_open_store(&a, st->s, &ao);
	if (rc < 0) {
		snprintf(msg, msize, "%s", htr_analysis_last_error(a));
		htr_analysis_close(a);
		return rc;
	}
	*out = a;
	return 0;
}

/* Give a handle back (GIL released). */
static void store_give(StoreObject *st, struct htr_analysis *a)
{
	pthread_mutex_lock(&st->mu);
	if (st->npool == st->cap) {
		size_t nc = st->cap ? 2 * st->cap : 4;
		struct htr_analysis **np = realloc(st->pool, nc * sizeof(*np));

		if (!np) {
			pthread_mutex_unlock(&st->mu);
			htr_analysis_close(a);
			return;
		}
		st->pool = np;
		st->cap = nc;
	}
	st->pool[st->npool++] = a;
	pthread_mutex_unlock(&st->mu);
}

/* ------------------------------------------------------------------ */
/* File */

typedef struct {
	PyObject_HEAD
	HandleObject *h;        /* NULL once closed */
	StoreObject *store;     /* opened on first analysis */
	PyObject *path;         /* str, or None for bytes */
	PyObject *sidecar;      /* str or None (the default) */
	int no_sidecar;
} FileObject;

static PyTypeObject FileType;

static struct htr_file *file_get(FileObject *self)
{
	if (!self->h) {
		PyErr_SetString(PyExc_ValueError, "htr: the file is closed");
		return NULL;
	}
	return self->h->f;
}

/* The store of @self, opened (and registered) on first use; a new
 * reference. */
static StoreObject *file_store(FileObject *self)
{
	struct htr_store_opts so;
	struct htr_file *f = file_get(self);
	StoreObject *st;
	PyObject *key = NULL;
	const char *sidecar = NULL;
	int rc, no_sidecar = self->no_sidecar || self->path == Py_None;

	if (!f)
		return NULL;
	if (self->store) {
		Py_INCREF(self->store);
		return self->store;
	}
	if (!no_sidecar) {
		key = call_glue("_sidecar_key", "(OO)", self->path,
				self->sidecar);
		if (!key)
			return NULL;
		if (self->sidecar != Py_None) {
			sidecar = PyUnicode_AsUTF8(self->sidecar);
			if (!sidecar)
				goto fail;
		}
		/* The store of this sidecar already open in the process? */
		{
			PyObject *ref = PyDict_GetItemWithError(stores, key);
			PyObject *o = ref ? PyWeakref_GetObject(ref) : NULL;

			if (PyErr_Occurred())
				goto fail;
			if (o && o != Py_None) {
				struct htr_file_info a, b;
				StoreObject *s = (StoreObject *) o;

				a.size = sizeof(a);
				b.size = sizeof(b);
				if (htr_file_info(s->h->f, &a, sizeof(a)) == 0 &&
				    htr_file_info(f, &b, sizeof(b)) == 0 &&
				    a.body_hash == b.body_hash &&
				    a.trace_hash == b.trace_hash &&
				    a.file_size == b.file_size) {
					Py_INCREF(s);
					self->store = s;
					Py_DECREF(key);
					Py_INCREF(s);
					return s;
				}
				/* Another file on the same sidecar (rebuilt
				 * since): one environment per process, so
				 * this one computes in memory. */
				no_sidecar = 1;
				Py_CLEAR(key);
			}
		}
	}
	st = PyObject_New(StoreObject, &StoreType);
	if (!st)
		goto fail;
	st->h = self->h;
	Py_INCREF(st->h);
	st->s = NULL;
	st->pool = NULL;
	st->npool = st->cap = 0;
	st->npy = 0;
	st->weakrefs = NULL;
	pthread_mutex_init(&st->mu, NULL);
	htr_store_opts_init(&so);
	so.sidecar = sidecar;
	so.no_sidecar = no_sidecar;
	Py_BEGIN_ALLOW_THREADS
	rc = htr_store_open(&st->s, f, &so);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		raise_htr(rc, htr_store_last_error(st->s));
		Py_DECREF(st);
		goto fail;
	}
	if (key) {
		PyObject *ref = PyWeakref_NewRef((PyObject *) st, NULL);

		if (!ref || PyDict_SetItem(stores, key, ref) < 0) {
			Py_XDECREF(ref);
			Py_DECREF(st);
			goto fail;
		}
		Py_DECREF(ref);
		Py_DECREF(key);
	}
	self->store = st;
	Py_INCREF(st);
	return st;
fail:
	Py_XDECREF(key);
	return NULL;
}

static int in_compute(void);

/* An analysis for one call: *@st (a reference the caller drops) and
 * *@a (given back with store_give()).  Opens the store and, the first
 * time, computes or reloads the analyses with the GIL released. */
static int analysis_begin(FileObject *self, StoreObject **st,
			  struct htr_analysis **a)
{
	char msg[512] = "";
	int rc;

	if (in_compute()) {
		raise_htr(HTR_ERR_INVALID, "an analyzer's compute() can read "
			  "the tree (f.blocks, f.columns(), ...) and, with "
			  "f.analysis(), the Python analyzers it declared in "
			  "deps, but no other analysis");
		return -1;
	}
	*st = file_store(self);
	if (!*st)
		return -1;
	Py_BEGIN_ALLOW_THREADS
	rc = store_take(*st, a, msg, sizeof(msg));
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		Py_CLEAR(*st);
		raise_htr(rc, msg);
		return -1;
	}
	return 0;
}

static void analysis_end(StoreObject *st, struct htr_analysis *a)
{
	store_give(st, a);
	Py_DECREF(st);
}

static void File_dealloc(FileObject *self)
{
	Py_XDECREF(self->store);
	Py_XDECREF(self->h);
	Py_XDECREF(self->path);
	Py_XDECREF(self->sidecar);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyObject *File_close(FileObject *self, PyObject *unused)
{
	(void) unused;
	Py_CLEAR(self->store);
	Py_CLEAR(self->h);
	Py_RETURN_NONE;
}

static PyObject *File_enter(FileObject *self, PyObject *unused)
{
	(void) unused;
	if (!file_get(self))
		return NULL;
	Py_INCREF(self);
	return (PyObject *) self;
}

static PyObject *File_exit(FileObject *self, PyObject *args)
{
	(void) args;
	return File_close(self, NULL);
}

static Py_ssize_t File_len(FileObject *self)
{
	struct htr_file *f = file_get(self);

	return f ? (Py_ssize_t) htr_block_count(f) : -1;
}

static PyObject *File_repr(FileObject *self)
{
	if (!self->h)
		return PyUnicode_FromFormat("<htr.File %R closed>", self->path);
	return PyUnicode_FromFormat("<htr.File %R: %u blocks>", self->path,
				    (unsigned) htr_block_count(self->h->f));
}

static PyObject *File_get_path(FileObject *self, void *c)
{
	(void) c;
	Py_INCREF(self->path);
	return self->path;
}

static PyObject *File_get_closed(FileObject *self, void *c)
{
	(void) c;
	return PyBool_FromLong(self->h == NULL);
}

static PyObject *File_get_info(FileObject *self, void *c)
{
	struct htr_file *f = file_get(self);
	struct htr_file_info fi;
	int rc;

	(void) c;
	if (!f)
		return NULL;
	fi.size = sizeof(fi);
	rc = htr_file_info(f, &fi, sizeof(fi));
	if (rc < 0)
		return raise_htr(rc, htr_file_last_error(f));
	return Py_BuildValue("{sIsKsKsKsKsKsKsKsKsIsKsKsKsKs(IIII)sK}",
		"version", fi.version, "file_size", fi.file_size,
		"ninsns", fi.ninsns, "nblocks", fi.nblocks,
		"nroots", fi.nroots, "nfuncs", fi.nfuncs, "ngaps", fi.ngaps,
		"ntsc", fi.ntsc, "nsync", fi.nsync, "max_depth", fi.max_depth,
		"trace_size", fi.trace_size, "trace_hash", fi.trace_hash,
		"image_hash", fi.image_hash, "body_hash", fi.body_hash,
		"libipt_version", fi.libipt_version[0], fi.libipt_version[1],
		fi.libipt_version[2], fi.libipt_version[3],
		"build_time", fi.build_time);
}

static PyObject *File_get_ninsns(FileObject *self, void *c)
{
	struct htr_file *f = file_get(self);
	struct htr_file_info fi;

	(void) c;
	if (!f)
		return NULL;
	fi.size = sizeof(fi);
	if (htr_file_info(f, &fi, sizeof(fi)) < 0)
		return raise_htr(HTR_ERR_INVALID, NULL);
	return PyLong_FromUnsignedLongLong(fi.ninsns);
}

static PyObject *File_get_thread(FileObject *self, void *c)
{
	struct htr_file *f = file_get(self);
	struct htr_thread_info ti;
	int rc;

	(void) c;
	if (!f)
		return NULL;
	ti.size = sizeof(ti);
	rc = htr_file_thread(f, &ti, sizeof(ti));
	if (rc == HTR_ERR_NOTFOUND)
		Py_RETURN_NONE;
	if (rc < 0)
		return raise_htr(rc, NULL);
	return Py_BuildValue("{sIsIsssIsIsKsKsKsK}", "pid", ti.pid,
			     "tid", ti.tid, "comm", ti.comm, "flags", ti.flags,
			     "time_shift", ti.time_shift,
			     "time_mult", ti.time_mult,
			     "time_zero", ti.time_zero, "wall_ns", ti.wall_ns,
			     "clock_ns", ti.clock_ns);
}

/* The records of a section as a Records buffer (a new reference). */
static PyObject *file_records(FileObject *self, uint32_t id,
			      uint32_t want_entsize)
{
	struct htr_file *f = file_get(self);
	RecordsObject *r;
	const void *data;
	uint64_t n;
	uint32_t es;
	int rc;

	if (!f)
		return NULL;
	rc = htr_file_section(f, id, &data, &n, &es);
	if (rc < 0)
		return raise_htr(rc, NULL);
	if (es != want_entsize)
		return raise_htr(HTR_ERR_VERSION, "htr: this module reads "
				 "another record size of this section");
	r = PyObject_New(RecordsObject, &RecordsType);
	if (!r)
		return NULL;
	r->h = self->h;
	Py_INCREF(r->h);
	r->data = data;
	r->len = (Py_ssize_t) (n * es);
	return (PyObject *) r;
}

static PyObject *File_records(FileObject *self, PyObject *args)
{
	unsigned id, es;

	if (!PyArg_ParseTuple(args, "II", &id, &es))
		return NULL;
	return file_records(self, id, es);
}

static PyObject *Block_new(FileObject *f, uint32_t i);
static PyTypeObject BlockSeqType;

/* BlockSeq: f.blocks without numpy. */
typedef struct {
	PyObject_HEAD
	FileObject *f;
} BlockSeqObject;

/* f.blocks: the zero-copy structured array (numpy), or a sequence of
 * Block objects. */
static PyObject *File_get_blocks(FileObject *self, void *c)
{
	PyObject *rec, *r;

	(void) c;
	if (!file_get(self))
		return NULL;
	rec = file_records(self, HTR_SECTION_BLOCKS, 32);
	if (!rec)
		return NULL;
	r = call_glue("_blocks", "(OO)", (PyObject *) self, rec);
	Py_DECREF(rec);
	return r;
}

static PyObject *File_get_glue(FileObject *self, void *fn)
{
	if (!file_get(self))
		return NULL;
	return call_glue((const char *) fn, "(O)", (PyObject *) self);
}

static PyObject *File_block_seq(FileObject *self, PyObject *unused)
{
	BlockSeqObject *o;

	(void) unused;
	if (!file_get(self))
		return NULL;
	o = PyObject_New(BlockSeqObject, &BlockSeqType);
	if (!o)
		return NULL;
	Py_INCREF(self);
	o->f = self;
	return (PyObject *) o;
}

/* columns(): one pass over htr_block_get() (every record checked as the
 * tree API checks it) into arrays, with the GIL released. */
struct columns {
	uint64_t *first, *last, *entry;
	uint32_t *parent, *nchildren, *func, *level, *anchor_func;
	uint8_t *flags;
};

static PyObject *File_columns(FileObject *self, PyObject *unused)
{
	struct htr_file *f = file_get(self);
	struct columns c;
	PyObject *d = NULL, *v;
	uint32_t n, i;
	int rc = 0;
	uint32_t bad = 0;

	(void) unused;
	if (!f)
		return NULL;
	n = htr_block_count(f);
	memset(&c, 0, sizeof(c));
	if (!(c.first = alloc_items(n, 8)) || !(c.last = alloc_items(n, 8)) ||
	    !(c.entry = alloc_items(n, 8)) || !(c.parent = alloc_items(n, 4)) ||
	    !(c.nchildren = alloc_items(n, 4)) ||
	    !(c.func = alloc_items(n, 4)) || !(c.level = alloc_items(n, 4)) ||
	    !(c.anchor_func = alloc_items(n, 4)) ||
	    !(c.flags = alloc_items(n, 1)))
		goto out;
	Py_BEGIN_ALLOW_THREADS
	for (i = 0; i < n && !rc; i++) {
		struct htr_block_info bi;

		rc = htr_block_get(f, i, &bi, sizeof(bi));
		if (rc < 0) {
			bad = i;
			break;
		}
		c.first[i] = bi.first;
		c.last[i] = bi.last;
		c.entry[i] = bi.entry;
		c.parent[i] = bi.parent;
		c.nchildren[i] = bi.nchildren;
		c.func[i] = bi.func;
		c.anchor_func[i] = bi.anchor_func;
		c.flags[i] = (uint8_t) bi.flags;
	}
	/* Post-order: a parent comes after its children, so levels are
	 * known walking backwards (roots are level 0, as dump says). */
	for (i = n; !rc && i-- > 0;) {
		uint32_t p = c.parent[i];

		if (p == HTR_NONE) {
			c.level[i] = 0;
		} else if (p <= i || p >= n) {
			rc = HTR_ERR_CORRUPT;
			bad = i;
		} else {
			c.level[i] = c.level[p] + 1;
		}
	}
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "block %u: %s", bad, htr_errstr(rc));
		raise_htr(rc, msg);
		goto out;
	}
	if (!(d = PyDict_New()))
		goto out;
#define PUT(name, ptr, fmt) do {                                        \
		v = wrap_array(ptr, n, fmt);                            \
		ptr = NULL;                                             \
		if (!v || PyDict_SetItemString(d, name, v) < 0) {       \
			Py_XDECREF(v);                                  \
			Py_CLEAR(d);                                    \
			goto out;                                       \
		}                                                       \
		Py_DECREF(v);                                           \
	} while (0)
	PUT("first", c.first, "Q");
	PUT("last", c.last, "Q");
	PUT("parent", c.parent, "I");
	PUT("nchildren", c.nchildren, "I");
	PUT("func", c.func, "I");
	PUT("anchor_func", c.anchor_func, "I");
	PUT("entry", c.entry, "Q");
	PUT("flags", c.flags, "B");
	PUT("level", c.level, "I");
#undef PUT
out:
	free(c.first);
	free(c.last);
	free(c.entry);
	free(c.parent);
	free(c.nchildren);
	free(c.func);
	free(c.anchor_func);
	free(c.level);
	free(c.flags);
	return d;
}

/* tsc(): total, children and local ticks of every block. */
static PyObject *File_tsc(FileObject *self, PyObject *unused)
{
	struct htr_file *f = file_get(self);
	struct htr_analysis *a;
	StoreObject *st;
	uint64_t *tot = NULL, *ch = NULL, *loc = NULL;
	PyObject *d = NULL, *v;
	uint32_t n, i;
	int rc = 0;
	char msg[512] = "";

	(void) unused;
	if (!f)
		return NULL;
	n = htr_block_count(f);
	if (!(tot = alloc_items(n, 8)) || !(ch = alloc_items(n, 8)) ||
	    !(loc = alloc_items(n, 8)))
		goto out;
	if (analysis_begin(self, &st, &a) < 0)
		goto out;
	Py_BEGIN_ALLOW_THREADS
	for (i = 0; i < n; i++) {
		rc = htr_tsc_get(a, i, &tot[i], &ch[i], &loc[i]);
		if (rc < 0) {
			snprintf(msg, sizeof(msg), "%s",
				 htr_analysis_last_error(a));
			break;
		}
	}
	store_give(st, a);
	Py_END_ALLOW_THREADS
	Py_DECREF(st);
	if (rc < 0) {
		raise_htr(rc, msg);
		goto out;
	}
	if (!(d = PyDict_New()))
		goto out;
	v = wrap_array(tot, n, "Q");
	tot = NULL;
	if (!v || PyDict_SetItemString(d, "total", v) < 0)
		goto bad;
	Py_DECREF(v);
	v = wrap_array(ch, n, "Q");
	ch = NULL;
	if (!v || PyDict_SetItemString(d, "children", v) < 0)
		goto bad;
	Py_DECREF(v);
	v = wrap_array(loc, n, "Q");
	loc = NULL;
	if (!v || PyDict_SetItemString(d, "local", v) < 0)
		goto bad;
	Py_DECREF(v);
	goto out;
bad:
	Py_XDECREF(v);
	Py_CLEAR(d);
out:
	free(tot);
	free(ch);
	free(loc);
	return d;
}

/* ------------------------------------------------------------------ */
/* Analyzers written in Python: htr.register_analyzer() and
 * f.analysis().  Each name gets one C descriptor (struct pyan, never
 * freed: the stores copy the descriptor and keep pointers to its
 * strings), registered lazily on every store before its next
 * f.analysis().  compute() takes the GIL and calls the Python callable
 * with the File that f.analysis() was called on; encode()/decode() and
 * free() are plain C over the copied numbers (no GIL).  The stored
 * values: key "h" = "PYA1", kind ('Q' uint64 or 'd' float64), 3 zero
 * bytes, the count (8 bytes LE); keys "c" + 4-byte big-endian index =
 * the numbers in chunks of PYAN_CHUNK bytes. */

#define PYAN_MAX 30              /* 32 per store, less tsc and sym */
#define PYAN_CHUNK ((size_t) 1 << 20)

struct pyan {
	char name[HTR_ANALYZER_NAME_MAX + 1];
	uint32_t version;
	const char **deps;       /* NULL-terminated, strdup'ed */
	size_t ndeps;
	PyObject *compute;       /* replaced by a same-version register */
	struct htr_analyzer d;
};

/* A result: n numbers of kind 'Q' or 'd'. */
struct pyres {
	uint64_t n;
	char kind;
	void *data;
};

static struct pyan *pyans[PYAN_MAX];
static unsigned npyans;          /* written under the GIL, then read */

/* One f.analysis() in progress on this thread. */
struct pycall {
	FileObject *file;
	struct htr_analyzer_ctx *ctx;    /* inside a compute() */
	const struct pyan *an;
	PyObject *exc;                   /* what compute() raised */
	struct pycall *prev;
};
static __thread struct pycall *cur_call;

static int in_compute(void)
{
	return cur_call && cur_call->ctx;
}

static struct pyan *pyan_find(const char *name)
{
	unsigned i;

	for (i = 0; i < npyans; i++)
		if (!strcmp(pyans[i]->name, name))
			return pyans[i];
	return NULL;
}

static void pyres_free(void *result, void *payload)
{
	struct pyres *r = result;

	(void) payload;
	if (r) {
		free(r->data);
		free(r);
	}
}

/* The numbers in @o (any buffer: 1-D, C-contiguous, 8-byte uint64 or
 * float64, @nb items) into a new result; NULL with a message in @msg. */
static struct pyres *pyres_from(PyObject *o, uint32_t nb, char *msg,
				size_t msize)
{
	Py_buffer v;
	struct pyres *r = NULL;
	const char *fmt;
	char kind = 0;

	if (PyObject_GetBuffer(o, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
		PyErr_Clear();
		snprintf(msg, msize, "compute() returned %s, not a buffer "
			 "(a numpy array of uint64 or float64)",
			 Py_TYPE(o)->tp_name);
		return NULL;
	}
	fmt = v.format ? v.format : "B";
	if (*fmt == '@' || *fmt == '=' || *fmt == '<')
		fmt++;
	if (v.itemsize == 8 && (!strcmp(fmt, "Q") || !strcmp(fmt, "L")))
		kind = 'Q';
	else if (v.itemsize == 8 && !strcmp(fmt, "d"))
		kind = 'd';
	if (!kind || v.ndim != 1) {
		snprintf(msg, msize, "compute() must return one uint64 or "
			 "float64 per block (a 1-D array), not format '%s', "
			 "%d dimension(s)", v.format ? v.format : "B", v.ndim);
		goto out;
	}
	if ((uint64_t) v.shape[0] != nb) {
		snprintf(msg, msize, "compute() returned %zd numbers for %u "
			 "blocks", v.shape[0], nb);
		goto out;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->data = malloc(nb ? (size_t) nb * 8 : 1))) {
		free(r);
		r = NULL;
		snprintf(msg, msize, "out of memory");
		goto out;
	}
	r->n = nb;
	r->kind = kind;
	memcpy(r->data, v.buf, (size_t) nb * 8);
out:
	PyBuffer_Release(&v);
	return r;
}

static int pyan_compute(struct htr_analyzer_ctx *ctx, void **result,
			void *payload)
{
	struct pyan *an = payload;
	PyGILState_STATE g = PyGILState_Ensure();
	struct pycall *c = cur_call;
	uint32_t nb = htr_block_count(htr_analyzer_file(ctx));
	struct htr_analyzer_ctx *pctx;
	const struct pyan *pan;
	PyObject *r, *et, *ev, *tb, *s;
	char msg[512];
	int rc = 0;

	*result = NULL;
	if (!c || !c->file) {
		rc = htr_analyzer_fail(ctx, HTR_ERR_INVALID, "analyzer '%s': "
				       "computed outside f.analysis()",
				       an->name);
		goto out;
	}
	pctx = c->ctx;
	pan = c->an;
	c->ctx = ctx;
	c->an = an;
	r = PyObject_CallFunctionObjArgs(an->compute, (PyObject *) c->file,
					 NULL);
	c->ctx = pctx;
	c->an = pan;
	if (!r) {
		PyErr_Fetch(&et, &ev, &tb);
		PyErr_NormalizeException(&et, &ev, &tb);
		if (ev && tb)
			PyException_SetTraceback(ev, tb);
		s = ev ? PyObject_Str(ev) : NULL;
		snprintf(msg, sizeof(msg), "%s", s ? PyUnicode_AsUTF8(s) : "");
		PyErr_Clear();
		Py_XDECREF(s);
		rc = htr_analyzer_fail(ctx, HTR_ERR_CALLBACK, "analyzer '%s': "
				       "compute() raised %s: %s", an->name,
				       et ? ((PyTypeObject *) et)->tp_name :
				       "?", msg);
		Py_XSETREF(c->exc, ev);
		Py_XDECREF(et);
		Py_XDECREF(tb);
		goto out;
	}
	*result = pyres_from(r, nb, msg, sizeof(msg));
	Py_DECREF(r);
	if (!*result)
		rc = htr_analyzer_fail(ctx, HTR_ERR_CALLBACK, "analyzer '%s': "
				       "%s", an->name, msg);
out:
	PyGILState_Release(g);
	return rc;
}

static int pyan_encode(struct htr_analyzer_ctx *ctx, const void *result,
		       void *payload)
{
	const struct pyres *r = result;
	const struct pyan *an = payload;
	uint8_t h[16] = { 'P', 'Y', 'A', '1' }, k[5] = { 'c' };
	size_t len = (size_t) r->n * 8, off;
	uint32_t i;
	int rc, b;

	h[4] = (uint8_t) r->kind;
	for (b = 0; b < 8; b++)
		h[8 + b] = (uint8_t) (r->n >> (8 * b));
	rc = htr_analyzer_put(ctx, "h", 1, h, sizeof(h));
	for (i = 0, off = 0; rc == 0 && off < len; i++, off += PYAN_CHUNK) {
		size_t cl = len - off < PYAN_CHUNK ? len - off : PYAN_CHUNK;

		k[1] = (uint8_t) (i >> 24);
		k[2] = (uint8_t) (i >> 16);
		k[3] = (uint8_t) (i >> 8);
		k[4] = (uint8_t) i;
		rc = htr_analyzer_put(ctx, k, sizeof(k),
				      (const char *) r->data + off, cl);
	}
	(void) an;
	return rc;
}

static int pyan_decode(struct htr_analyzer_ctx *ctx, void **result,
		       void *payload)
{
	const struct pyan *an = payload;
	const uint8_t *h;
	const void *val;
	size_t vlen, len, off;
	struct pyres *r;
	uint8_t k[5] = { 'c' };
	uint64_t n = 0;
	uint32_t i;
	int rc, b;

	*result = NULL;
	rc = htr_analyzer_value(ctx, "h", 1, &val, &vlen);
	if (rc == HTR_ERR_NOTFOUND || (rc == 0 && vlen != 16))
		return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "analyzer '%s'"
					 ": no header in %s", an->name,
					 htr_analyzer_sidecar(ctx));
	if (rc < 0)
		return rc;
	h = val;
	for (b = 0; b < 8; b++)
		n |= (uint64_t) h[8 + b] << (8 * b);
	if (memcmp(h, "PYA1", 4) || (h[4] != 'Q' && h[4] != 'd') ||
	    n != htr_block_count(htr_analyzer_file(ctx)))
		return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "analyzer '%s'"
					 ": bad header in %s", an->name,
					 htr_analyzer_sidecar(ctx));
	r = calloc(1, sizeof(*r));
	len = (size_t) n * 8;
	if (!r || !(r->data = malloc(len ? len : 1))) {
		free(r);
		return HTR_ERR_NOMEM;
	}
	r->n = n;
	r->kind = (char) h[4];
	for (i = 0, off = 0; off < len; i++, off += PYAN_CHUNK) {
		size_t cl = len - off < PYAN_CHUNK ? len - off : PYAN_CHUNK;

		k[1] = (uint8_t) (i >> 24);
		k[2] = (uint8_t) (i >> 16);
		k[3] = (uint8_t) (i >> 8);
		k[4] = (uint8_t) i;
		rc = htr_analyzer_value(ctx, k, sizeof(k), &val, &vlen);
		if (rc == 0 && vlen != cl)
			rc = HTR_ERR_NOTFOUND;
		if (rc < 0) {
			pyres_free(r, NULL);
			if (rc != HTR_ERR_NOTFOUND)
				return rc;
			return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT,
						 "analyzer '%s': chunk %u "
						 "missing or short in %s",
						 an->name, i,
						 htr_analyzer_sidecar(ctx));
		}
		memcpy((char *) r->data + off, val, cl);
	}
	*result = r;
	return 0;
}

/* Register the Python analyzers @st does not have yet (GIL held on
 * entry; released while registering). */
static int store_sync(StoreObject *st)
{
	unsigned n = npyans, i, bad = 0;
	int rc = 0;

	if (st->npy >= n)
		return 0;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&st->mu);
	for (i = st->npy; i < n; i++) {
		rc = htr_store_register(st->s, &pyans[i]->d);
		if (rc < 0) {
			bad = i;
			break;
		}
	}
	st->npy = rc < 0 ? bad + 1 : n;
	pthread_mutex_unlock(&st->mu);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		char m[128];

		snprintf(m, sizeof(m), "registering analyzer '%s' on the "
			 "store failed", pyans[bad]->name);
		raise_htr(rc, m);
		return -1;
	}
	return 0;
}

static PyObject *pyres_array(const struct pyres *r)
{
	void *copy = alloc_items(r->n, 8);

	if (!copy)
		return NULL;
	memcpy(copy, r->data, (size_t) r->n * 8);
	return wrap_array(copy, r->n, r->kind == 'd' ? "d" : "Q");
}

static PyObject *no_analyzer(const char *name)
{
	char m[600];
	size_t len;
	unsigned i;

	len = (size_t) snprintf(m, sizeof(m), "no analyzer '%s' (there are "
				"tsc, sym", name);
	for (i = 0; i < npyans && len < sizeof(m); i++)
		len += (size_t) snprintf(m + len, sizeof(m) - len, ", %s",
					 pyans[i]->name);
	if (len < sizeof(m))
		snprintf(m + len, sizeof(m) - len, "; htr.register_analyzer() "
			 "adds one)");
	return raise_htr(HTR_ERR_NOTFOUND, m);
}

/* analysis(name): the results of analyzer @name as an array, one number
 * per block. */
static PyObject *File_analysis(FileObject *self, PyObject *arg)
{
	struct htr_file *f = file_get(self);
	const char *name;
	struct pyan *an;
	struct htr_analysis *a;
	struct pycall call;
	StoreObject *st;
	const void *res = NULL;
	struct pyres *copy = NULL;
	char msg[512] = "";
	int rc;

	if (!f)
		return NULL;
	name = PyUnicode_AsUTF8(arg);
	if (!name)
		return NULL;
	if (in_compute()) {
		/* From a compute(): its declared Python dependencies. */
		const struct pyan *me = cur_call->an;
		size_t i;

		an = pyan_find(name);
		for (i = 0; an && i < me->ndeps; i++)
			if (!strcmp(me->deps[i], name))
				break;
		if (!an || i == me->ndeps) {
			char m[256];

			snprintf(m, sizeof(m), "analyzer '%s': compute() may "
				 "read with f.analysis() only the Python "
				 "analyzers in its deps, not '%s'", me->name,
				 name);
			return raise_htr(HTR_ERR_INVALID, m);
		}
		rc = htr_analyzer_dep(cur_call->ctx, name, &res);
		if (rc < 0 || !res)
			return raise_htr(rc < 0 ? rc : HTR_ERR_NOTFOUND,
					 "dependency not computed");
		return pyres_array(res);
	}
	if (!strcmp(name, "tsc"))
		return File_tsc(self, NULL);
	if (!strcmp(name, "sym"))
		return raise_htr(HTR_ERR_INVALID, "analyzer 'sym' is names "
				 "and a symbol index, not one number per "
				 "block: use f.names() (per block), f.find() "
				 "or f.top()");
	an = pyan_find(name);
	if (!an)
		return no_analyzer(name);
	if (analysis_begin(self, &st, &a) < 0)
		return NULL;
	if (store_sync(st) < 0) {
		analysis_end(st, a);
		return NULL;
	}
	memset(&call, 0, sizeof(call));
	call.file = self;
	call.prev = cur_call;
	cur_call = &call;
	Py_BEGIN_ALLOW_THREADS
	rc = htr_store_get(st->s, name, a, &res);
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "%s", htr_analysis_last_error(a));
		/* not back to the pool: a fresh handle next time */
		htr_analysis_close(a);
	} else {
		const struct pyres *r = res;

		copy = malloc(sizeof(*copy));
		if (copy) {
			*copy = *r;
			copy->data = malloc(r->n ? (size_t) r->n * 8 : 1);
			if (copy->data)
				memcpy(copy->data, r->data, (size_t) r->n * 8);
		}
		store_give(st, a);
	}
	Py_END_ALLOW_THREADS
	cur_call = call.prev;
	Py_DECREF(st);
	if (rc < 0) {
		PyObject *e = call.exc;

		if (e && !PyObject_TypeCheck(e, (PyTypeObject *)
					     PyExc_Exception)) {
			/* KeyboardInterrupt, SystemExit: as they are */
			PyErr_SetObject((PyObject *) Py_TYPE(e), e);
			Py_DECREF(e);
			return NULL;
		}
		raise_htr(rc, msg);
		if (e) {
			PyObject *et, *ev, *tb;

			PyErr_Fetch(&et, &ev, &tb);
			PyErr_NormalizeException(&et, &ev, &tb);
			if (ev)
				PyException_SetCause(ev, e);  /* steals e */
			else
				Py_DECREF(e);
			PyErr_Restore(et, ev, tb);
		}
		return NULL;
	}
	if (!copy || !copy->data) {
		if (copy)
			free(copy);
		return PyErr_NoMemory();
	}
	{
		PyObject *r = wrap_array(copy->data, copy->n,
					 copy->kind == 'd' ? "d" : "Q");
		free(copy);
		return r;
	}
}

static int name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (!n || n > HTR_ANALYZER_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

/* register_analyzer(name, version, compute, deps=()) */
static PyObject *htr_register_analyzer(PyObject *mod, PyObject *args,
				       PyObject *kw)
{
	static char *kwl[] = { "name", "version", "compute", "deps", NULL };
	const char *name;
	unsigned long long version;
	PyObject *compute, *deps = NULL, *seq = NULL;
	struct pyan *an = NULL, *old;
	Py_ssize_t nd = 0, i;
	char m[256];

	(void) mod;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "sKO|O:register_analyzer",
					 kwl, &name, &version, &compute,
					 &deps))
		return NULL;
	if (!name_ok(name)) {
		PyErr_Format(PyExc_ValueError, "analyzer name '%s': 1 to %d "
			     "of [a-z0-9_]", name, HTR_ANALYZER_NAME_MAX);
		return NULL;
	}
	if (!strcmp(name, "tsc") || !strcmp(name, "sym")) {
		PyErr_Format(PyExc_ValueError, "'%s' is a built-in analyzer",
			     name);
		return NULL;
	}
	if (version > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "version: 0 to 2**32-1");
		return NULL;
	}
	if (!PyCallable_Check(compute)) {
		PyErr_SetString(PyExc_TypeError, "compute must be callable");
		return NULL;
	}
	if (deps && deps != Py_None) {
		if (PyUnicode_Check(deps)) {
			PyErr_SetString(PyExc_TypeError, "deps: a sequence "
					"of names, not a str");
			return NULL;
		}
		seq = PySequence_Fast(deps, "deps: a sequence of names");
		if (!seq)
			return NULL;
		nd = PySequence_Fast_GET_SIZE(seq);
	}
	for (i = 0; i < nd; i++) {
		PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
		const char *d = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) :
			NULL;

		if (!d || !name_ok(d) || !strcmp(d, name)) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "deps: "
						"names of other analyzers");
			goto fail;
		}
	}
	old = pyan_find(name);
	if (old) {
		int same = old->version == version && (size_t) nd ==
			old->ndeps;

		for (i = 0; same && i < nd; i++)
			same = !strcmp(old->deps[i], PyUnicode_AsUTF8(
				PySequence_Fast_GET_ITEM(seq, i)));
		if (!same) {
			snprintf(m, sizeof(m), "analyzer '%s' is registered "
				 "with version %u and other deps; a process "
				 "keeps one descriptor per name (start a new "
				 "process to change them)", name,
				 old->version);
			Py_XDECREF(seq);
			return raise_htr(HTR_ERR_INVALID, m);
		}
		Py_INCREF(compute);
		Py_SETREF(old->compute, compute);
		Py_XDECREF(seq);
		Py_RETURN_NONE;
	}
	if (npyans == PYAN_MAX) {
		snprintf(m, sizeof(m), "at most %d Python analyzers",
			 PYAN_MAX);
		Py_XDECREF(seq);
		return raise_htr(HTR_ERR_LIMIT, m);
	}
	an = calloc(1, sizeof(*an));
	if (!an || !(an->deps = calloc((size_t) nd + 1, sizeof(char *))))
		goto nomem;
	for (i = 0; i < nd; i++)
		if (!(an->deps[i] = strdup(PyUnicode_AsUTF8(
				PySequence_Fast_GET_ITEM(seq, i)))))
			goto nomem;
	an->ndeps = (size_t) nd;
	snprintf(an->name, sizeof(an->name), "%s", name);
	an->version = (uint32_t) version;
	Py_INCREF(compute);
	an->compute = compute;
	htr_analyzer_init(&an->d);
	an->d.name = an->name;
	an->d.version = an->version;
	an->d.deps = nd ? (const char *const *) an->deps : NULL;
	an->d.compute = pyan_compute;
	an->d.encode = pyan_encode;
	an->d.decode = pyan_decode;
	an->d.free = pyres_free;
	an->d.payload = an;
	pyans[npyans++] = an;
	Py_XDECREF(seq);
	Py_RETURN_NONE;
nomem:
	if (an) {
		for (i = 0; an->deps && i < nd; i++)
			free((void *) an->deps[i]);
		free(an->deps);
		free(an);
	}
	PyErr_NoMemory();
fail:
	Py_XDECREF(seq);
	return NULL;
}

/* analyzers() -> the names f.analysis() knows */
static PyObject *htr_analyzers_fn(PyObject *mod, PyObject *unused)
{
	PyObject *l = Py_BuildValue("[ss]", "tsc", "sym");
	unsigned i;

	(void) mod;
	(void) unused;
	for (i = 0; l && i < npyans; i++) {
		PyObject *s = PyUnicode_FromString(pyans[i]->name);

		if (!s || PyList_Append(l, s) < 0) {
			Py_XDECREF(s);
			Py_CLEAR(l);
			break;
		}
		Py_DECREF(s);
	}
	return l;
}

/* names(): (codes, names): codes[i] indexes names, the name of block i
 * (as htr dump --tsc and find print it).  One string per function, not
 * per block.  The names are interned by content in a small hash table
 * while the GIL is released. */
struct intern {
	const char **names;     /* by code, owned by the analysis handle */
	uint32_t nnames, capnames;
	uint32_t *slots;        /* code + 1, 0 = empty */
	uint32_t nslots;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char) *s++) * 1099511628211ull;
	return h;
}

static int intern_add(struct intern *t, const char *s, uint32_t *code)
{
	uint64_t h;
	uint32_t k;

	if (2 * (t->nnames + 1) > t->nslots) {
		uint32_t ns = t->nslots ? 2 * t->nslots : 1024, j;
		uint32_t *sl = calloc(ns, sizeof(*sl));

		if (!sl)
			return HTR_ERR_NOMEM;
		for (j = 0; j < t->nnames; j++) {
			k = (uint32_t) (str_hash(t->names[j]) & (ns - 1));
			while (sl[k])
				k = (k + 1) & (ns - 1);
			sl[k] = j + 1;
		}
		free(t->slots);
		t->slots = sl;
		t->nslots = ns;
	}
	h = str_hash(s);
	for (k = (uint32_t) (h & (t->nslots - 1)); t->slots[k];
	     k = (k + 1) & (t->nslots - 1)) {
		const char *o = t->names[t->slots[k] - 1];

		if (o == s || !strcmp(o, s)) {
			*code = t->slots[k] - 1;
			return 0;
		}
	}
	if (t->nnames == t->capnames) {
		uint32_t nc = t->capnames ? 2 * t->capnames : 256;
		const char **nn = realloc(t->names, nc * sizeof(*nn));

		if (!nn)
			return HTR_ERR_NOMEM;
		t->names = nn;
		t->capnames = nc;
	}
	t->names[t->nnames] = s;
	t->slots[k] = ++t->nnames;
	*code = t->nnames - 1;
	return 0;
}

static PyObject *File_names(FileObject *self, PyObject *unused)
{
	struct htr_file *f = file_get(self);
	struct htr_analysis *a;
	struct intern t;
	StoreObject *st;
	uint32_t *codes, n, i;
	PyObject *list = NULL, *arr = NULL, *r = NULL;
	int rc = 0;
	char msg[512] = "";

	(void) unused;
	if (!f)
		return NULL;
	n = htr_block_count(f);
	if (!(codes = alloc_items(n, 4)))
		return NULL;
	memset(&t, 0, sizeof(t));
	if (analysis_begin(self, &st, &a) < 0) {
		free(codes);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	for (i = 0; i < n && rc == 0; i++) {
		const char *name;

		rc = htr_block_name(a, i, &name);
		if (rc == 0)
			rc = intern_add(&t, name, &codes[i]);
		if (rc < 0)
			snprintf(msg, sizeof(msg), "%s",
				 htr_analysis_last_error(a));
	}
	Py_END_ALLOW_THREADS
	/* The names point into the handle: copy them before giving it
	 * back. */
	if (rc == 0 && (list = PyList_New(t.nnames)))
		for (i = 0; i < t.nnames; i++) {
			PyObject *s = PyUnicode_DecodeUTF8(t.names[i],
				(Py_ssize_t) strlen(t.names[i]), "replace");

			if (!s) {
				Py_CLEAR(list);
				break;
			}
			PyList_SET_ITEM(list, i, s);
		}
	Py_BEGIN_ALLOW_THREADS
	store_give(st, a);
	Py_END_ALLOW_THREADS
	Py_DECREF(st);
	free(t.names);
	free(t.slots);
	if (rc < 0) {
		free(codes);
		return raise_htr(rc, msg);
	}
	if (!list) {
		free(codes);
		return NULL;
	}
	arr = wrap_array(codes, n, "I");
	if (arr)
		r = PyTuple_Pack(2, arr, list);
	Py_XDECREF(arr);
	Py_DECREF(list);
	return r;
}

/* top() and find(): rows as the CLI's --json prints them. */
struct func_row {
	char *name;
	uint64_t calls, inclusive, local, slowest_total;
	uint32_t slowest;
};

struct func_rows {
	struct func_row *v;
	size_t n, cap;
};

static int add_func(const struct htr_func_stats *s, void *payload)
{
	struct func_rows *c = payload;
	struct func_row *r;

	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 256;
		struct func_row *nv = realloc(c->v, nc * sizeof(*nv));

		if (!nv)
			return 1;
		c->v = nv;
		c->cap = nc;
	}
	r = &c->v[c->n];
	if (!(r->name = strdup(s->name)))
		return 1;
	r->calls = s->calls;
	r->inclusive = s->inclusive;
	r->local = s->local;
	r->slowest = s->slowest;
	r->slowest_total = s->slowest_total;
	c->n++;
	return 0;
}

/* Whether times are given in ns too (the file knows perf's clock). */
static int has_ns(struct htr_file *f)
{
	uint64_t ns;

	return htr_ticks_to_ns(f, 0, &ns) == 0;
}

static int put_ns(PyObject *d, struct htr_file *f, const char *key,
		  uint64_t ticks)
{
	uint64_t ns;
	PyObject *v;
	int rc;

	if (htr_ticks_to_ns(f, ticks, &ns) < 0)
		ns = ticks;
	v = PyLong_FromUnsignedLongLong(ns);
	if (!v)
		return -1;
	rc = PyDict_SetItemString(d, key, v);
	Py_DECREF(v);
	return rc;
}

static PyObject *File_top(FileObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "n", "sort", "pattern", NULL };
	struct htr_file *f = file_get(self);
	Py_ssize_t limit = 20;
	const char *sort = "local", *pattern = NULL;
	struct func_rows c = { NULL, 0, 0 };
	struct htr_analysis *a;
	StoreObject *st;
	PyObject *list = NULL;
	size_t i, n;
	int rc, key, ns;
	char msg[512] = "";

	if (!f)
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|nsz", kwlist, &limit,
					 &sort, &pattern))
		return NULL;
	if (!strcmp(sort, "local"))
		key = HTR_TOP_LOCAL;
	else if (!strcmp(sort, "inclusive"))
		key = HTR_TOP_INCLUSIVE;
	else if (!strcmp(sort, "calls"))
		key = HTR_TOP_CALLS;
	else
		return PyErr_Format(PyExc_ValueError, "htr: top: sort: "
				    "expected local, inclusive or calls, not "
				    "'%s'", sort);
	if (analysis_begin(self, &st, &a) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = htr_top_visit(a, pattern, pattern && strpbrk(pattern, "*?[") ?
			   HTR_MATCH_GLOB : HTR_MATCH_EXACT, key,
			   limit > 0 ? (uint64_t) limit : 0, add_func, &c);
	if (rc == 1)
		rc = HTR_ERR_NOMEM;
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", htr_analysis_last_error(a));
	store_give(st, a);
	Py_END_ALLOW_THREADS
	Py_DECREF(st);
	if (rc < 0 && rc != HTR_ERR_NOTFOUND) {
		raise_htr(rc, msg);
		goto out;
	}
	n = c.n;
	ns = has_ns(f);
	if (!(list = PyList_New((Py_ssize_t) n)))
		goto out;
	for (i = 0; i < n; i++) {
		const struct func_row *r = &c.v[i];
		PyObject *d = Py_BuildValue("{sssKsKsKsIsK}", "name", r->name,
			"calls", r->calls, "inclusive", r->inclusive,
			"local", r->local, "slowest", r->slowest,
			"slowest_total", r->slowest_total);

		if (!d || (ns && (put_ns(d, f, "inclusive_ns", r->inclusive) ||
				  put_ns(d, f, "local_ns", r->local) ||
				  put_ns(d, f, "slowest_total_ns",
					 r->slowest_total)))) {
			Py_XDECREF(d);
			Py_CLEAR(list);
			goto out;
		}
		PyList_SET_ITEM(list, (Py_ssize_t) i, d);
	}
out:
	for (i = 0; i < c.n; i++)
		free(c.v[i].name);
	free(c.v);
	return list;
}

struct hit {
	uint32_t block;
	char *name;
	uint64_t first, last, total, local;
};

struct hits {
	struct hit *v;
	size_t n, cap;
};

/* A copy of @x: the analysis goes back to the store before the list is
 * made. */
static int add_hit(const struct htr_find_hit *x, void *payload)
{
	struct hits *c = payload;
	struct hit *h;

	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 256;
		struct hit *nv = realloc(c->v, nc * sizeof(*nv));

		if (!nv)
			return 1;
		c->v = nv;
		c->cap = nc;
	}
	h = &c->v[c->n];
	if (!(h->name = strdup(x->name)))
		return 1;
	h->block = x->block;
	h->first = x->first;
	h->last = x->last;
	h->total = x->total;
	h->local = x->local;
	c->n++;
	return 0;
}

static PyObject *File_find(FileObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "pattern", "sort", "limit", NULL };
	struct htr_file *f = file_get(self);
	const char *pattern, *sort = "time";
	Py_ssize_t limit = 0;
	struct hits c;
	struct htr_analysis *a;
	StoreObject *st;
	PyObject *list = NULL;
	size_t i, n;
	int rc, ns, order;
	char msg[512] = "";

	if (!f)
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|sn", kwlist, &pattern,
					 &sort, &limit))
		return NULL;
	if (!*pattern)
		return PyErr_Format(PyExc_ValueError, "htr: find: an empty "
				    "pattern");
	if (!strcmp(sort, "time"))
		order = HTR_FIND_TIME;
	else if (!strcmp(sort, "cost"))
		order = HTR_FIND_COST;
	else
		return PyErr_Format(PyExc_ValueError, "htr: find: sort: "
				    "expected time or cost, not '%s'", sort);
	memset(&c, 0, sizeof(c));
	if (analysis_begin(self, &st, &a) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = htr_find_visit(f, a, pattern, strpbrk(pattern, "*?[") ?
			    HTR_MATCH_GLOB : HTR_MATCH_EXACT, order,
			    limit > 0 ? (uint64_t) limit : 0, add_hit, &c);
	if (rc == 1)
		rc = HTR_ERR_NOMEM;
	if (rc == HTR_ERR_IO && errno)
		snprintf(msg, sizeof(msg), "sorting the hits in a temporary "
			 "file: %s", strerror(errno));
	else if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", htr_analysis_last_error(a));
	store_give(st, a);
	Py_END_ALLOW_THREADS
	Py_DECREF(st);
	if (rc < 0 && rc != HTR_ERR_NOTFOUND) {
		raise_htr(rc, msg);
		goto out;
	}
	n = c.n;
	ns = has_ns(f);
	if (!(list = PyList_New((Py_ssize_t) n)))
		goto out;
	for (i = 0; i < n; i++) {
		const struct hit *h = &c.v[i];
		PyObject *d = Py_BuildValue("{sIsssKsKsKsK}", "block", h->block,
			"name", h->name, "first", h->first, "last", h->last,
			"total", h->total, "local", h->local);

		if (!d || (ns && (put_ns(d, f, "total_ns", h->total) ||
				  put_ns(d, f, "local_ns", h->local)))) {
			Py_XDECREF(d);
			Py_CLEAR(list);
			goto out;
		}
		PyList_SET_ITEM(list, (Py_ssize_t) i, d);
	}
out:
	for (i = 0; i < c.n; i++)
		free(c.v[i].name);
	free(c.v);
	return list;
}

static PyObject *File_block(FileObject *self, PyObject *arg)
{
	struct htr_file *f = file_get(self);
	long long i;

	if (!f)
		return NULL;
	i = PyLong_AsLongLong(arg);
	if (i == -1 && PyErr_Occurred())
		return NULL;
	if (i < 0)
		i += htr_block_count(f);
	if (i < 0 || i >= (long long) htr_block_count(f))
		return PyErr_Format(PyExc_IndexError, "htr: no block %lld", i);
	return Block_new(self, (uint32_t) i);
}

static PyObject *File_roots(FileObject *self, PyObject *unused)
{
	struct htr_file *f = file_get(self);
	PyObject *list;
	uint32_t b;
	uint64_t guard = 0;

	(void) unused;
	if (!f || !(list = PyList_New(0)))
		return NULL;
	for (b = htr_tree_first_root(f); b != HTR_NONE;
	     b = htr_block_next_sibling(f, b)) {
		PyObject *o;

		if (++guard > htr_block_count(f)) {
			Py_DECREF(list);
			return raise_htr(HTR_ERR_CORRUPT, "htr: a cycle in the "
					 "root chain");
		}
		o = Block_new(self, b);
		if (!o || PyList_Append(list, o) < 0) {
			Py_XDECREF(o);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(o);
	}
	return list;
}

static PyObject *File_block_for_insn(FileObject *self, PyObject *arg)
{
	struct htr_file *f = file_get(self);
	unsigned long long id;
	uint32_t b;
	int rc;

	if (!f)
		return NULL;
	id = PyLong_AsUnsignedLongLong(arg);
	if (id == (unsigned long long) -1 && PyErr_Occurred())
		return NULL;
	rc = htr_block_for_insn(f, id, &b);
	if (rc == HTR_ERR_NOTFOUND)
		Py_RETURN_NONE;
	if (rc < 0)
		return raise_htr(rc, NULL);
	return Block_new(self, b);
}

static PyObject *File_tsc_at(FileObject *self, PyObject *arg)
{
	struct htr_file *f = file_get(self);
	unsigned long long id;
	uint64_t tsc;
	int rc;

	if (!f)
		return NULL;
	id = PyLong_AsUnsignedLongLong(arg);
	if (id == (unsigned long long) -1 && PyErr_Occurred())
		return NULL;
	rc = htr_tsc_for_insn(f, id, &tsc);
	if (rc == HTR_ERR_NOTFOUND)
		Py_RETURN_NONE;
	if (rc < 0)
		return raise_htr(rc, NULL);
	return PyLong_FromUnsignedLongLong(tsc);
}

static PyObject *File_ticks_to_ns(FileObject *self, PyObject *arg)
{
	struct htr_file *f = file_get(self);
	unsigned long long t;
	uint64_t ns;

	if (!f)
		return NULL;
	t = PyLong_AsUnsignedLongLong(arg);
	if (t == (unsigned long long) -1 && PyErr_Occurred())
		return NULL;
	if (htr_ticks_to_ns(f, t, &ns) < 0)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(ns);
}

static PyObject *File_analysis_info(FileObject *self, PyObject *unused)
{
	struct htr_analysis *a;
	StoreObject *st;
	PyObject *r;

	(void) unused;
	if (analysis_begin(self, &st, &a) < 0)
		return NULL;
	r = Py_BuildValue("{sIssss}", "flags", htr_analysis_flags(a),
			  "note", htr_analysis_note(a),
			  "sidecar", htr_analysis_sidecar(a));
	analysis_end(st, a);
	return r;
}

static PyObject *Cursor_create(FileObject *f, PyObject *args, PyObject *kw);

static PyObject *File_to_pandas(FileObject *self, PyObject *args,
				PyObject *kw)
{
	PyObject *f = PyDict_GetItemString(glue, "_to_pandas"), *a, *r;

	if (!file_get(self) || !f)
		return NULL;
	a = PyTuple_Pack(1, (PyObject *) self);
	if (!a)
		return NULL;
	if (args && PyTuple_GET_SIZE(args)) {
		PyObject *t = PySequence_Concat(a, args);

		Py_DECREF(a);
		if (!(a = t))
			return NULL;
	}
	r = PyObject_Call(f, a, kw);
	Py_DECREF(a);
	return r;
}

/* f.export(): the library's exporters (htr/export.h), as `htr export`. */
static PyObject *File_export(FileObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "format", "path", "block", "depth",
				  "min_duration", "gaps", "ticks", "args",
				  NULL };
	struct htr_file *f = file_get(self);
	const char *format;
	PyObject *path_o = NULL, *block_o = Py_None, *r = NULL;
	PyObject *depth_o = Py_None, *min_o = Py_None;
	int gaps = 0, ticks = 0, eargs = 0, rc, saved = 0;
	struct htr_export_opts eo;
	struct htr_analysis *a;
	StoreObject *st;
	char msg[512] = "";
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = NULL;

	if (!f)
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|O&OOOppp", kwlist,
					 &format, PyUnicode_FSConverter,
					 &path_o, &block_o, &depth_o, &min_o,
					 &gaps, &ticks, &eargs))
		return NULL;
	htr_export_opts_init(&eo);
	eo.format = htr_export_format_of(format);
	if (eo.format < 0) {
		PyErr_Format(PyExc_ValueError, "htr: export: format: chrome, "
			     "folded or perfetto, not '%s'", format);
		goto out;
	}
	if (!htr_export_has(eo.format)) {
		raise_htr(HTR_ERR_INVALID, "export: perfetto: this libhtr was "
			  "built without libprotobuf-c");
		goto out;
	}
	if (block_o != Py_None) {
		PyObject *n = PyNumber_Long(block_o);
		unsigned long b;

		if (!n)
			goto out;
		b = PyLong_AsUnsignedLong(n);
		Py_DECREF(n);
		if (PyErr_Occurred())
			goto out;
		if (b >= htr_block_count(f)) {
			PyErr_Format(PyExc_IndexError, "htr: export: block %lu: "
				     "no such block", b);
			goto out;
		}
		eo.block = (uint32_t) b;
	}
	if (depth_o != Py_None) {
		eo.max_depth = PyLong_AsUnsignedLongLong(depth_o);
		if (PyErr_Occurred())
			goto out;
		if (!eo.max_depth) {
			PyErr_SetString(PyExc_ValueError, "htr: export: depth: "
					"1 or more");
			goto out;
		}
	}
	if (min_o != Py_None) {
		eo.min_duration = PyLong_AsUnsignedLongLong(min_o);
		if (PyErr_Occurred())
			goto out;
	}
	eo.flags = (gaps ? HTR_EXPORT_GAPS : 0) | (ticks ? HTR_EXPORT_TICKS : 0) |
		   (eargs ? HTR_EXPORT_ARGS : 0);
	if (!path_o) {
		mem = open_memstream(&buf, &len);
		if (!mem) {
			PyErr_NoMemory();
			goto out;
		}
	}
	if (analysis_begin(self, &st, &a) < 0)
		goto out;
	Py_BEGIN_ALLOW_THREADS
	if (path_o)
		rc = htr_export_path(f, a, PyBytes_AS_STRING(path_o), &eo);
	else
		rc = htr_export(f, a, mem, &eo);
	saved = errno;
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", htr_analysis_last_error(a));
	store_give(st, a);
	Py_END_ALLOW_THREADS
	Py_DECREF(st);
	if (mem) {
		if (fclose(mem) != 0 && rc == 0)
			rc = HTR_ERR_NOMEM;
		mem = NULL;
	}
	if (rc == HTR_ERR_IO && path_o) {
		errno = saved;
		PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_o);
	} else if (rc < 0) {
		raise_htr(rc, rc == HTR_ERR_NOMEM ? NULL : msg);
	} else if (path_o) {
		r = Py_None;
		Py_INCREF(r);
	} else {
		r = PyBytes_FromStringAndSize(buf, (Py_ssize_t) len);
	}
out:
	if (mem)
		fclose(mem);
	free(buf);
	Py_XDECREF(path_o);
	return r;
}

static PyMethodDef File_methods[] = {
	{ "export", (PyCFunction) (void (*)(void)) File_export,
	  METH_VARARGS | METH_KEYWORDS,
	  "export(format, path=None, block=None, depth=None, "
	  "min_duration=None, gaps=False, ticks=False, args=False) -> None, "
	  "or bytes without a path.  The tree in 'chrome', 'folded' or "
	  "'perfetto' (htr.has_perfetto) format, byte for byte what `htr "
	  "export` writes (libhtr's htr_export()); a path is written all or "
	  "nothing.  block: that subtree; depth: levels at most; "
	  "min_duration: leave out blocks whose total is below it, in the "
	  "output's unit (ns for a perf.data build unless ticks, else TSC "
	  "ticks)." },
	{ "close", (PyCFunction) File_close, METH_NOARGS,
	  "close(): no further calls; arrays taken before stay valid" },
	{ "__enter__", (PyCFunction) File_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction) File_exit, METH_VARARGS, NULL },
	{ "columns", (PyCFunction) File_columns, METH_NOARGS,
	  "columns() -> dict of arrays (first, last, parent, nchildren, func, "
	  "anchor_func, entry, flags, level), one item per block (a copy)" },
	{ "tsc", (PyCFunction) File_tsc, METH_NOARGS,
	  "tsc() -> dict of uint64 arrays total, children, local (ticks)" },
	{ "analysis", (PyCFunction) File_analysis, METH_O,
	  "analysis(name) -> the results of analyzer name, one number per "
	  "block: 'tsc' as tsc()'s dict, a Python analyzer "
	  "(htr.register_analyzer) as a uint64 or float64 array, reloaded "
	  "from the sidecar when it is current.  'sym' and unknown names "
	  "raise htr.Error" },
	{ "names", (PyCFunction) File_names, METH_NOARGS,
	  "names() -> (codes, names): names[codes[i]] is block i's name" },
	{ "top", (PyCFunction) (void (*)(void)) File_top,
	  METH_VARARGS | METH_KEYWORDS,
	  "top(n=20, sort='local', pattern=None) -> list of dicts as "
	  "htr top --json (n <= 0: all)" },
	{ "find", (PyCFunction) (void (*)(void)) File_find,
	  METH_VARARGS | METH_KEYWORDS,
	  "find(pattern, sort='time', limit=0) -> list of dicts as "
	  "htr find --json" },
	{ "block", (PyCFunction) File_block, METH_O,
	  "block(i) -> Block" },
	{ "roots", (PyCFunction) File_roots, METH_NOARGS,
	  "roots() -> list of the root Blocks, in time" },
	{ "block_for_insn", (PyCFunction) File_block_for_insn, METH_O,
	  "block_for_insn(id) -> the deepest Block containing it, or None" },
	{ "tsc_at", (PyCFunction) File_tsc_at, METH_O,
	  "tsc_at(id) -> the TSC the build knew at instruction id, or None" },
	{ "ticks_to_ns", (PyCFunction) File_ticks_to_ns, METH_O,
	  "ticks_to_ns(ticks) -> ns on perf's clock, or None" },
	{ "analysis_info", (PyCFunction) File_analysis_info, METH_NOARGS,
	  "analysis_info() -> dict flags, note, sidecar" },
	{ "insns", (PyCFunction) (void (*)(void)) Cursor_create,
	  METH_VARARGS | METH_KEYWORDS,
	  "insns(trace, start=0, block=None, count=0, cpu=None) -> Cursor, "
	  "an iterator of Insn" },
	{ "to_pandas", (PyCFunction) (void (*)(void)) File_to_pandas,
	  METH_VARARGS | METH_KEYWORDS,
	  "to_pandas(names=True, times=True) -> pandas.DataFrame, a row per "
	  "block" },
	{ "_records", (PyCFunction) File_records, METH_VARARGS, NULL },
	{ "_block_seq", (PyCFunction) File_block_seq, METH_NOARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef File_getset[] = {
	{ "path", (getter) File_get_path, NULL, "the path, None for bytes",
	  NULL },
	{ "closed", (getter) File_get_closed, NULL, NULL, NULL },
	{ "info", (getter) File_get_info, NULL, "header facts (dict)", NULL },
	{ "ninsns", (getter) File_get_ninsns, NULL, "instruction count",
	  NULL },
	{ "thread", (getter) File_get_thread, NULL,
	  "the recorded thread and its clock (dict), or None", NULL },
	{ "blocks", (getter) File_get_blocks, NULL,
	  "the block records: a zero-copy numpy structured array, or a "
	  "sequence of Block without numpy", NULL },
	{ "tsc_points", (getter) File_get_glue, NULL,
	  "the time points (id, tsc) in place: a numpy structured array, "
	  "or a list of tuples", (void *) "_tsc_points" },
	{ "funcs", (getter) File_get_glue, NULL,
	  "the entry addresses of the function table, in place",
	  (void *) "_funcs" },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PySequenceMethods File_as_sequence = {
	.sq_length = (lenfunc) File_len,
};

static PyTypeObject FileType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr.File",
	.tp_basicsize = sizeof(FileObject),
	.tp_dealloc = (destructor) File_dealloc,
	.tp_repr = (reprfunc) File_repr,
	.tp_as_sequence = &File_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An open .htr file (htr.open()).",
	.tp_methods = File_methods,
	.tp_getset = File_getset,
};

/* ------------------------------------------------------------------ */
/* Block */

typedef struct {
	PyObject_HEAD
	FileObject *f;
	uint32_t i;
} BlockObject;

static PyTypeObject BlockType;

static PyObject *Block_new(FileObject *f, uint32_t i)
{
	BlockObject *b = PyObject_New(BlockObject, &BlockType);

	if (!b)
		return NULL;
	Py_INCREF(f);
	b->f = f;
	b->i = i;
	return (PyObject *) b;
}

static void Block_dealloc(BlockObject *self)
{
	Py_DECREF(self->f);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static int block_info(BlockObject *self, struct htr_block_info *bi)
{
	struct htr_file *f = file_get(self->f);
	int rc;

	if (!f)
		return -1;
	rc = htr_block_get(f, self->i, bi, sizeof(*bi));
	if (rc < 0) {
		raise_htr(rc, NULL);
		return -1;
	}
	return 0;
}

static PyObject *Block_get(BlockObject *self, void *which)
{
	struct htr_block_info bi;

	if (block_info(self, &bi) < 0)
		return NULL;
	switch ((intptr_t) which) {
	case 0: return PyLong_FromUnsignedLongLong(bi.first);
	case 1: return PyLong_FromUnsignedLongLong(bi.last);
	case 2:
		if (bi.func == HTR_NONE)
			Py_RETURN_NONE;
		return PyLong_FromUnsignedLongLong(bi.entry);
	case 3:
		if (bi.func == HTR_NONE)
			Py_RETURN_NONE;
		return PyLong_FromUnsignedLong(bi.func);
	case 4:
		if (bi.parent == HTR_NONE)
			Py_RETURN_NONE;
		return Block_new(self->f, bi.parent);
	case 5: return PyLong_FromUnsignedLong(bi.flags);
	case 6: return PyLong_FromUnsignedLong(bi.nchildren);
	case 7: {
		/* The library's names (htr dump's), as a list. */
		char buf[64];
		PyObject *str, *sep, *l;

		if (!bi.flags)
			return PyList_New(0);
		str = PyUnicode_FromString(htr_block_flags_str(bi.flags, buf,
							       sizeof(buf)));
		sep = PyUnicode_FromString(",");
		l = str && sep ? PyUnicode_Split(str, sep, -1) : NULL;
		Py_XDECREF(str);
		Py_XDECREF(sep);
		return l;
	}
	case 8:
		if (bi.anchor_func == HTR_NONE)
			Py_RETURN_NONE;
		return PyLong_FromUnsignedLongLong(bi.anchor);
	}
	Py_RETURN_NONE;
}

static PyObject *Block_get_index(BlockObject *self, void *c)
{
	(void) c;
	return PyLong_FromUnsignedLong(self->i);
}

static PyObject *Block_get_children(BlockObject *self, void *c)
{
	struct htr_file *f = file_get(self->f);
	PyObject *list;
	uint32_t b, n, k = 0;

	(void) c;
	if (!f)
		return NULL;
	n = htr_block_child_count(f, self->i);
	if (!(list = PyList_New(0)))
		return NULL;
	for (b = htr_block_first_child(f, self->i); b != HTR_NONE && k < n;
	     b = htr_block_next_sibling(f, b), k++) {
		PyObject *o = Block_new(self->f, b);

		if (!o || PyList_Append(list, o) < 0) {
			Py_XDECREF(o);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(o);
	}
	return list;
}

static PyObject *Block_get_ancestors(BlockObject *self, void *c)
{
	struct htr_file *f = file_get(self->f);
	PyObject *list;
	uint32_t b, k = 0;

	(void) c;
	if (!f || !(list = PyList_New(0)))
		return NULL;
	for (b = htr_block_parent(f, self->i); b != HTR_NONE;
	     b = htr_block_parent(f, b)) {
		PyObject *o;

		if (++k > htr_block_count(f)) {
			Py_DECREF(list);
			return raise_htr(HTR_ERR_CORRUPT, "htr: a parent cycle");
		}
		o = Block_new(self->f, b);
		if (!o || PyList_Append(list, o) < 0) {
			Py_XDECREF(o);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(o);
	}
	return list;
}

static PyObject *Block_get_depth(BlockObject *self, void *c)
{
	struct htr_file *f = file_get(self->f);
	int64_t d;

	(void) c;
	if (!f)
		return NULL;
	d = htr_block_depth(f, self->i);
	if (d < 0)
		return raise_htr((int) d, NULL);
	return PyLong_FromLongLong(d);
}

static PyObject *Block_get_name(BlockObject *self, void *c)
{
	struct htr_analysis *a;
	StoreObject *st;
	const char *name;
	PyObject *r;
	int rc;

	(void) c;
	if (!file_get(self->f) || analysis_begin(self->f, &st, &a) < 0)
		return NULL;
	rc = htr_block_name(a, self->i, &name);
	r = rc < 0 ? raise_htr(rc, htr_analysis_last_error(a)) :
	    PyUnicode_DecodeUTF8(name, (Py_ssize_t) strlen(name), "replace");
	analysis_end(st, a);
	return r;
}

static PyObject *Block_get_times(BlockObject *self, void *c)
{
	struct htr_analysis *a;
	StoreObject *st;
	uint64_t t, ch, l;
	PyObject *r;
	int rc;

	(void) c;
	if (!file_get(self->f) || analysis_begin(self->f, &st, &a) < 0)
		return NULL;
	rc = htr_tsc_get(a, self->i, &t, &ch, &l);
	r = rc < 0 ? raise_htr(rc, htr_analysis_last_error(a)) :
	    Py_BuildValue("{sKsKsK}", "total", t, "children", ch, "local", l);
	analysis_end(st, a);
	return r;
}

static PyObject *Block_repr(BlockObject *self)
{
	struct htr_block_info bi;

	if (!self->f->h)
		return PyUnicode_FromFormat("<htr.Block %u (closed file)>",
					    self->i);
	if (block_info(self, &bi) < 0)
		return NULL;
	return PyUnicode_FromFormat("<htr.Block %u: %llu..%llu>", self->i,
				    (unsigned long long) bi.first,
				    (unsigned long long) bi.last);
}

static PyObject *Block_richcompare(BlockObject *a, PyObject *o, int op)
{
	BlockObject *b;
	int eq;

	if (!PyObject_TypeCheck(o, &BlockType) || (op != Py_EQ && op != Py_NE))
		Py_RETURN_NOTIMPLEMENTED;
	b = (BlockObject *) o;
	eq = a->f == b->f && a->i == b->i;
	return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t Block_hash(BlockObject *self)
{
	Py_hash_t h = (Py_hash_t) self->i ^ (Py_hash_t) (uintptr_t) self->f;

	return h == -1 ? -2 : h;
}

static PyObject *Block_int(BlockObject *self)
{
	return PyLong_FromUnsignedLong(self->i);
}

static PyGetSetDef Block_getset[] = {
	{ "index", (getter) Block_get_index, NULL, "block index", NULL },
	{ "first", (getter) Block_get, NULL, "first instruction ID",
	  (void *) 0 },
	{ "last", (getter) Block_get, NULL, "last instruction ID",
	  (void *) 1 },
	{ "entry", (getter) Block_get, NULL, "entry address or None",
	  (void *) 2 },
	{ "func", (getter) Block_get, NULL,
	  "index in the function table, or None", (void *) 3 },
	{ "parent", (getter) Block_get, NULL, "parent Block or None",
	  (void *) 4 },
	{ "flags", (getter) Block_get, NULL, "HTR_BLOCK_* bits",
	  (void *) 5 },
	{ "nchildren", (getter) Block_get, NULL, "number of children",
	  (void *) 6 },
	{ "flag_names", (getter) Block_get, NULL,
	  "flags as htr dump names them", (void *) 7 },
	{ "anchor", (getter) Block_get, NULL,
	  "an address in the block's function (late blocks too), or None",
	  (void *) 8 },
	{ "children", (getter) Block_get_children, NULL,
	  "children, in time", NULL },
	{ "ancestors", (getter) Block_get_ancestors, NULL,
	  "parent, its parent, ... up to the root", NULL },
	{ "depth", (getter) Block_get_depth, NULL, "1 for a root", NULL },
	{ "name", (getter) Block_get_name, NULL,
	  "function name (the symbol analyzer's)", NULL },
	{ "times", (getter) Block_get_times, NULL,
	  "dict total, children, local (TSC ticks)", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyNumberMethods Block_as_number = {
	.nb_index = (unaryfunc) Block_int,
	.nb_int = (unaryfunc) Block_int,
};

static PyTypeObject BlockType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr.Block",
	.tp_basicsize = sizeof(BlockObject),
	.tp_dealloc = (destructor) Block_dealloc,
	.tp_repr = (reprfunc) Block_repr,
	.tp_as_number = &Block_as_number,
	.tp_hash = (hashfunc) Block_hash,
	.tp_richcompare = (richcmpfunc) Block_richcompare,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One function invocation of an htr.File (f.block(i)).",
	.tp_getset = Block_getset,
};

static void BlockSeq_dealloc(BlockSeqObject *self)
{
	Py_XDECREF(self->f);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static Py_ssize_t BlockSeq_len(BlockSeqObject *self)
{
	return File_len(self->f);
}

static PyObject *BlockSeq_item(BlockSeqObject *self, Py_ssize_t i)
{
	Py_ssize_t n = File_len(self->f);

	if (n < 0)
		return NULL;
	if (i < 0 || i >= n)
		return PyErr_Format(PyExc_IndexError, "htr: no block %zd", i);
	return Block_new(self->f, (uint32_t) i);
}

static PySequenceMethods BlockSeq_as_sequence = {
	.sq_length = (lenfunc) BlockSeq_len,
	.sq_item = (ssizeargfunc) BlockSeq_item,
};

static PyTypeObject BlockSeqType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr.BlockSeq",
	.tp_basicsize = sizeof(BlockSeqObject),
	.tp_dealloc = (destructor) BlockSeq_dealloc,
	.tp_as_sequence = &BlockSeq_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The blocks of an htr.File as Block objects (no numpy).",
};

/* ------------------------------------------------------------------ */
/* Cursor */

static PyTypeObject InsnType;
static PyStructSequence_Field insn_fields[] = {
	{ "id", "the tree's instruction ID" },
	{ "ip", "its address" },
	{ "bytes", "its bytes" },
	{ "tsc", "the TSC the build knew there, or None" },
	{ "gap", "enum htr_gap_kind of a gap right before it, 0 if none" },
	{ "cls", "HTR_INSN_* class" },
	{ "mode", "16, 32 or 64" },
	{ NULL, NULL },
};
static PyStructSequence_Desc insn_desc = {
	"htr.Insn", "One instruction of the trace (File.insns()).",
	insn_fields, 7,
};

#define CURSOR_BATCH 4096

typedef struct {
	PyObject_HEAD
	FileObject *f;
	HandleObject *h;        /* the file stays mapped while we decode */
	struct htr_cursor *c;
	pthread_mutex_t busy;
	struct htr_insn *buf;
	unsigned pos, n;
	uint64_t last;          /* stop after this ID */
	uint64_t left;          /* instructions still to give; UINT64_MAX */
	int done;
} CursorObject;

static PyTypeObject CursorType;

static void Cursor_dealloc(CursorObject *self)
{
	htr_cursor_free(self->c);
	free(self->buf);
	pthread_mutex_destroy(&self->busy);
	Py_XDECREF(self->f);
	Py_XDECREF(self->h);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyObject *Cursor_create(FileObject *f, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "trace", "start", "block", "count", "cpu",
				  NULL };
	struct htr_file *hf = file_get(f);
	struct htr_cursor_opts co;
	PyObject *trace_o = NULL, *block_o = Py_None, *cpu_o = Py_None;
	unsigned long long start = 0, count = 0;
	CursorObject *c;
	int rc;

	if (!hf)
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|KOKO", kwlist,
					 PyUnicode_FSConverter, &trace_o,
					 &start, &block_o, &count, &cpu_o))
		return NULL;
	c = PyObject_New(CursorObject, &CursorType);
	if (!c) {
		Py_DECREF(trace_o);
		return NULL;
	}
	Py_INCREF(f);
	c->f = f;
	c->h = f->h;
	Py_INCREF(c->h);
	c->c = NULL;
	pthread_mutex_init(&c->busy, NULL);
	c->buf = NULL;
	c->pos = c->n = 0;
	c->last = UINT64_MAX;
	c->left = count ? count : UINT64_MAX;
	c->done = 0;
	htr_cursor_opts_init(&co);
	co.trace = PyBytes_AS_STRING(trace_o);
	if (cpu_o != Py_None &&
	    !PyArg_ParseTuple(cpu_o, "ii|i", &co.cpu_family, &co.cpu_model,
			      &co.cpu_stepping))
		goto fail;
	if (block_o != Py_None) {
		struct htr_block_info bi;
		long long b = PyLong_AsLongLong(block_o);

		if (b == -1 && PyErr_Occurred())
			goto fail;
		rc = b < 0 || b > UINT32_MAX ? HTR_ERR_RANGE :
		     htr_block_get(hf, (uint32_t) b, &bi, sizeof(bi));
		if (rc < 0) {
			raise_htr(rc, NULL);
			goto fail;
		}
		start = bi.first;
		c->last = bi.last;
	}
	if (!(c->buf = malloc(CURSOR_BATCH * sizeof(*c->buf)))) {
		PyErr_NoMemory();
		goto fail;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = htr_cursor_alloc(&c->c, hf, &co);
	if (rc == 0)
		rc = htr_cursor_seek(c->c, start);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		raise_htr(rc, htr_cursor_last_error(c->c));
		goto fail;
	}
	Py_DECREF(trace_o);
	return (PyObject *) c;
fail:
	Py_DECREF(trace_o);
	Py_DECREF(c);
	return NULL;
}

/* Decode the next batch with the GIL released; 0 or an error code
 * (the message on the cursor). */
static int cursor_fill(CursorObject *self)
{
	unsigned n = 0;
	int rc = 0;

	Py_BEGIN_ALLOW_THREADS
	while (n < CURSOR_BATCH && self->left) {
		struct htr_insn *in = &self->buf[n];

		rc = htr_cursor_next(self->c, in, sizeof(*in));
		if (rc == HTR_ERR_ITEROVER || (rc == 0 && in->id > self->last)) {
			rc = 0;
			self->done = 1;
			break;
		}
		if (rc < 0)
			break;
		n++;
		if (self->left != UINT64_MAX)
			self->left--;
	}
	if (!self->left)
		self->done = 1;
	Py_END_ALLOW_THREADS
	self->n = n;
	self->pos = 0;
	return rc;
}

static PyObject *insn_obj(const struct htr_insn *in)
{
	PyObject *o = PyStructSequence_New(&InsnType);
	PyObject *v[7];
	int k;

	if (!o)
		return NULL;
	v[0] = PyLong_FromUnsignedLongLong(in->id);
	v[1] = PyLong_FromUnsignedLongLong(in->ip);
	v[2] = PyBytes_FromStringAndSize((const char *) in->raw,
					 in->len <= 15 ? in->len : 15);
	if (in->has_tsc) {
		v[3] = PyLong_FromUnsignedLongLong(in->tsc);
	} else {
		v[3] = Py_None;
		Py_INCREF(Py_None);
	}
	v[4] = PyLong_FromLong(in->gap);
	v[5] = PyLong_FromLong((long) in->cls);
	v[6] = PyLong_FromLong(in->mode);
	for (k = 0; k < 7; k++) {
		if (!v[k]) {
			while (++k < 7)
				Py_XDECREF(v[k]);
			Py_DECREF(o);
			return NULL;
		}
		PyStructSequence_SET_ITEM(o, k, v[k]);
	}
	return o;
}

static PyObject *Cursor_next(CursorObject *self)
{
	PyObject *r = NULL;
	int rc;

	if (pthread_mutex_trylock(&self->busy) != 0)
		return PyErr_Format(PyExc_RuntimeError, "htr: a cursor "
				    "belongs to one thread at a time");
	if (self->pos == self->n) {
		if (self->done)
			goto out;       /* StopIteration */
		rc = cursor_fill(self);
		if (rc < 0) {
			self->done = 1;
			raise_htr(rc, htr_cursor_last_error(self->c));
			goto out;
		}
		if (!self->n)
			goto out;
	}
	r = insn_obj(&self->buf[self->pos++]);
out:
	pthread_mutex_unlock(&self->busy);
	return r;
}

static PyObject *Cursor_iter(PyObject *self)
{
	Py_INCREF(self);
	return self;
}

/* read(n): the next n instructions (or fewer at the end) as a dict of
 * arrays: id, ip, tsc (0 where has_tsc is 0), has_tsc, len, gap. */
static PyObject *Cursor_read(CursorObject *self, PyObject *args)
{
	unsigned long long want = CURSOR_BATCH;
	uint64_t *id = NULL, *ip = NULL, *tsc = NULL, k = 0;
	uint8_t *has = NULL, *len = NULL, *gap = NULL;
	PyObject *d = NULL, *v;
	int rc = 0;

	if (!PyArg_ParseTuple(args, "|K", &want))
		return NULL;
	if (pthread_mutex_trylock(&self->busy) != 0)
		return PyErr_Format(PyExc_RuntimeError, "htr: a cursor "
				    "belongs to one thread at a time");
	if (!(id = alloc_items(want, 8)) || !(ip = alloc_items(want, 8)) ||
	    !(tsc = alloc_items(want, 8)) || !(has = alloc_items(want, 1)) ||
	    !(len = alloc_items(want, 1)) || !(gap = alloc_items(want, 1)))
		goto out;
	while (k < want) {
		if (self->pos == self->n) {
			if (self->done)
				break;
			rc = cursor_fill(self);
			if (rc < 0) {
				self->done = 1;
				raise_htr(rc, htr_cursor_last_error(self->c));
				goto out;
			}
			if (!self->n)
				break;
		}
		for (; self->pos < self->n && k < want; self->pos++, k++) {
			const struct htr_insn *in = &self->buf[self->pos];

			id[k] = in->id;
			ip[k] = in->ip;
			tsc[k] = in->has_tsc ? in->tsc : 0;
			has[k] = (uint8_t) !!in->has_tsc;
			len[k] = in->len;
			gap[k] = (uint8_t) in->gap;
		}
	}
	if (!(d = PyDict_New()))
		goto out;
#define PUT(name, ptr, fmt) do {                                        \
		v = wrap_array(ptr, k, fmt);                            \
		ptr = NULL;                                             \
		if (!v || PyDict_SetItemString(d, name, v) < 0) {       \
			Py_XDECREF(v);                                  \
			Py_CLEAR(d);                                    \
			goto out;                                       \
		}                                                       \
		Py_DECREF(v);                                           \
	} while (0)
	PUT("id", id, "Q");
	PUT("ip", ip, "Q");
	PUT("tsc", tsc, "Q");
	PUT("has_tsc", has, "B");
	PUT("len", len, "B");
	PUT("gap", gap, "B");
#undef PUT
out:
	pthread_mutex_unlock(&self->busy);
	free(id);
	free(ip);
	free(tsc);
	free(has);
	free(len);
	free(gap);
	return d;
}

static PyObject *Cursor_seek(CursorObject *self, PyObject *arg)
{
	unsigned long long id = PyLong_AsUnsignedLongLong(arg);
	int rc;

	if (id == (unsigned long long) -1 && PyErr_Occurred())
		return NULL;
	if (pthread_mutex_trylock(&self->busy) != 0)
		return PyErr_Format(PyExc_RuntimeError, "htr: a cursor "
				    "belongs to one thread at a time");
	Py_BEGIN_ALLOW_THREADS
	rc = htr_cursor_seek(self->c, id);
	Py_END_ALLOW_THREADS
	self->pos = self->n = 0;
	self->done = 0;
	self->last = UINT64_MAX;
	self->left = UINT64_MAX;
	pthread_mutex_unlock(&self->busy);
	if (rc < 0)
		return raise_htr(rc, htr_cursor_last_error(self->c));
	Py_RETURN_NONE;
}

static PyMethodDef Cursor_methods[] = {
	{ "read", (PyCFunction) Cursor_read, METH_VARARGS,
	  "read(n=4096) -> dict of arrays id, ip, tsc, has_tsc, len, gap" },
	{ "seek", (PyCFunction) Cursor_seek, METH_O,
	  "seek(id): go on from instruction id (no end, no count)" },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject CursorType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "htr.Cursor",
	.tp_basicsize = sizeof(CursorObject),
	.tp_dealloc = (destructor) Cursor_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Instructions re-decoded from the trace (File.insns()); "
		  "one thread at a time.",
	.tp_iter = Cursor_iter,
	.tp_iternext = (iternextfunc) Cursor_next,
	.tp_methods = Cursor_methods,
};

/* ------------------------------------------------------------------ */
/* htr.open() */

static PyObject *htr_open(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "path", "verify", "sidecar", "no_sidecar",
				  NULL };
	struct htr_open_opts oo;
	PyObject *src, *sidecar = Py_None, *pathb = NULL;
	int verify = 0, no_sidecar = 0, rc;
	HandleObject *h;
	FileObject *fo;

	(void) mod;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pOp", kwlist, &src,
					 &verify, &sidecar, &no_sidecar))
		return NULL;
	if (sidecar != Py_None && !PyUnicode_Check(sidecar))
		return PyErr_Format(PyExc_TypeError, "htr: sidecar: a str");
	h = PyObject_New(HandleObject, &HandleType);
	if (!h)
		return NULL;
	h->f = NULL;
	h->mem = NULL;
	h->bytes = NULL;
	htr_open_opts_init(&oo);
	oo.verify_body = verify;
	if (PyObject_CheckBuffer(src)) {
		/* The bytes of an .htr file: read in place when they are an
		 * aligned bytes object (immutable), else copied. */
		Py_buffer view;
		const void *data;

		if (PyObject_GetBuffer(src, &view, PyBUF_SIMPLE) < 0)
			goto fail;
		if (PyBytes_CheckExact(src) &&
		    ((uintptr_t) view.buf & 7) == 0) {
			data = view.buf;
			h->bytes = src;
			Py_INCREF(src);
		} else {
			if (posix_memalign(&h->mem, 8,
					   view.len ? (size_t) view.len : 8)) {
				h->mem = NULL;
				PyBuffer_Release(&view);
				PyErr_NoMemory();
				goto fail;
			}
			memcpy(h->mem, view.buf, (size_t) view.len);
			data = h->mem;
		}
		Py_BEGIN_ALLOW_THREADS
		rc = htr_file_open_buffer(&h->f, data, (size_t) view.len, &oo);
		Py_END_ALLOW_THREADS
		PyBuffer_Release(&view);
	} else {
		if (!PyUnicode_FSConverter(src, &pathb))
			goto fail;
		Py_BEGIN_ALLOW_THREADS
		rc = htr_file_open(&h->f, PyBytes_AS_STRING(pathb), &oo);
		Py_END_ALLOW_THREADS
	}
	if (rc < 0) {
		raise_htr(rc, htr_file_last_error(h->f));
		goto fail;
	}
	fo = PyObject_New(FileObject, &FileType);
	if (!fo)
		goto fail;
	fo->h = h;
	fo->store = NULL;
	fo->no_sidecar = no_sidecar;
	fo->sidecar = sidecar;
	Py_INCREF(sidecar);
	if (pathb) {
		fo->path = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(pathb));
		Py_DECREF(pathb);
		if (!fo->path) {
			Py_DECREF(fo);
			return NULL;
		}
	} else {
		fo->path = Py_None;
		Py_INCREF(Py_None);
	}
	return (PyObject *) fo;
fail:
	Py_XDECREF(pathb);
	Py_DECREF(h);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* htr.build() */

static PyTypeObject ProgressType;
static PyStructSequence_Field progress_fields[] = {
	{ "offset", "trace bytes consumed" },
	{ "trace_size", "trace bytes in all" },
	{ "insns", "instructions so far" },
	{ "blocks", "blocks completed so far" },
	{ NULL, NULL },
};
static PyStructSequence_Desc progress_desc = {
	"htr.Progress", "A build's progress (htr.build(progress=...)).",
	progress_fields, 4,
};

struct build_ctx {
	PyThreadState *ts;
	PyObject *cb;           /* callable or NULL */
	int raised;             /* an exception is pending (restored after) */
	PyObject *et, *ev, *tb;
};

/* The progress callback, on the thread that called htr.build(): take the
 * GIL back, let signal handlers run (Ctrl-C), call the Python callable.
 * An exception or a False return cancels the build. */
static int build_progress(const struct htr_build_progress *p, void *payload)
{
	struct build_ctx *ctx = payload;
	int rc = 0;

	PyEval_RestoreThread(ctx->ts);
	if (PyErr_CheckSignals() < 0) {
		rc = 1;
	} else if (ctx->cb) {
		PyObject *pr = PyStructSequence_New(&ProgressType), *r = NULL;

		if (pr) {
			PyStructSequence_SET_ITEM(pr, 0,
				PyLong_FromUnsignedLongLong(p->offset));
			PyStructSequence_SET_ITEM(pr, 1,
				PyLong_FromUnsignedLongLong(p->trace_size));
			PyStructSequence_SET_ITEM(pr, 2,
				PyLong_FromUnsignedLongLong(p->insns));
			PyStructSequence_SET_ITEM(pr, 3,
				PyLong_FromUnsignedLongLong(p->blocks));
			if (PyErr_Occurred())
				Py_CLEAR(pr);
		}
		if (pr)
			r = PyObject_CallOneArg(ctx->cb, pr);
		Py_XDECREF(pr);
		if (!r)
			rc = 1;
		else if (r == Py_False)
			rc = 1;
		Py_XDECREF(r);
	}
	if (rc && PyErr_Occurred()) {
		ctx->raised = 1;
		PyErr_Fetch(&ctx->et, &ctx->ev, &ctx->tb);
	}
	ctx->ts = PyEval_SaveThread();
	return rc;
}

/* Add one image piece: "FILE[@BASE]" (elf) or "SPEC" (raw), (path, base)
 * for an ELF at a base, (bytes, vaddr[, name]) for raw bytes. */
static int add_image(struct htr_builder *b, PyObject *o, int raw)
{
	int rc;

	if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) >= 2 &&
	    PyObject_CheckBuffer(PyTuple_GET_ITEM(o, 0))) {
		Py_buffer view;
		unsigned long long va;
		const char *name = NULL;

		if (!PyArg_ParseTuple(o, "y*K|z", &view, &va, &name))
			return -1;
		rc = htr_builder_add_bytes(b, view.buf, (size_t) view.len, va,
					   name);
		PyBuffer_Release(&view);
	} else if (PyTuple_Check(o)) {
		PyObject *p = NULL;
		unsigned long long base;
		uint64_t b64;

		if (!PyArg_ParseTuple(o, "O&K", PyUnicode_FSConverter, &p,
				      &base))
			return -1;
		b64 = base;
		rc = htr_builder_add_elf_at(b, PyBytes_AS_STRING(p), &b64);
		Py_DECREF(p);
	} else {
		PyObject *p = NULL;

		if (!PyUnicode_FSConverter(o, &p))
			return -1;
		rc = raw ? htr_builder_add_raw(b, PyBytes_AS_STRING(p)) :
		     htr_builder_add_elf(b, PyBytes_AS_STRING(p));
		Py_DECREF(p);
	}
	if (rc < 0) {
		raise_htr(rc, htr_builder_last_error(b));
		return -1;
	}
	return 0;
}

static int add_images(struct htr_builder *b, PyObject *o, int raw)
{
	PyObject *seq;
	Py_ssize_t i;
	int rc = 0;

	if (!o || o == Py_None)
		return 0;
	if (PyUnicode_Check(o) || PyBytes_Check(o) || PyTuple_Check(o) ||
	    PyObject_HasAttrString(o, "__fspath__"))
		return add_image(b, o, raw);
	seq = PySequence_Fast(o, "htr: build: elf/raw: a path or a list");
	if (!seq)
		return -1;
	for (i = 0; i < PySequence_Fast_GET_SIZE(seq) && !rc; i++)
		rc = add_image(b, PySequence_Fast_GET_ITEM(seq, i), raw);
	Py_DECREF(seq);
	return rc;
}

static PyObject *htr_build_fn(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "trace", "out", "elf", "raw", "progress",
				  "threads", "cpu", "mtc_freq", "nom_freq",
				  "cpuid_0x15_eax", "cpuid_0x15_ebx",
				  "no_fsync", "decoder", NULL };
	PyObject *trace_o, *out_o = NULL, *elf = NULL, *raw = NULL;
	PyObject *progress = Py_None, *cpu = Py_None, *tpath = NULL;
	unsigned threads = 0, eax = 0, ebx = 0;
	unsigned char mtc = 0, nom = 0;
	int no_fsync = 0, rc;
	const char *decoder = NULL;
	struct htr_build_opts bo;
	struct htr_build_stats bs;
	struct htr_builder *b = NULL;
	struct build_ctx ctx;
	Py_buffer tview;
	int have_view = 0;
	PyObject *r = NULL;

	(void) mod;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&|OOOIObbIIpz", kwlist,
					 &trace_o, PyUnicode_FSConverter,
					 &out_o, &elf, &raw, &progress,
					 &threads, &cpu, &mtc, &nom, &eax,
					 &ebx, &no_fsync, &decoder))
		return NULL;
	if (progress != Py_None && !PyCallable_Check(progress)) {
		PyErr_SetString(PyExc_TypeError, "htr: build: progress: a "
				"callable");
		goto out;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.cb = progress == Py_None ? NULL : progress;
	htr_build_opts_init(&bo);
	bo.progress = build_progress;
	bo.payload = &ctx;
	bo.threads = threads;
	bo.mtc_freq = mtc;
	bo.nom_freq = nom;
	bo.cpuid_0x15_eax = eax;
	bo.cpuid_0x15_ebx = ebx;
	bo.no_fsync = no_fsync;
	if (decoder) {
		if (!strcmp(decoder, "walk"))
			bo.decoder = HTR_DECODER_WALK;
		else if (!strcmp(decoder, "block"))
			bo.decoder = HTR_DECODER_BLOCK;
		else {
			PyErr_Format(PyExc_ValueError, "htr: build: decoder: "
				     "walk or block, not '%s'", decoder);
			goto out;
		}
	}
	if (cpu != Py_None && !PyArg_ParseTuple(cpu, "ii|i", &bo.cpu_family,
						&bo.cpu_model,
						&bo.cpu_stepping))
		goto out;
	rc = htr_builder_alloc(&b, &bo);
	if (rc < 0) {
		raise_htr(rc, NULL);
		goto out;
	}
	if (add_images(b, elf, 0) < 0 || add_images(b, raw, 1) < 0)
		goto out;
	memset(&bs, 0, sizeof(bs));
	if (PyObject_CheckBuffer(trace_o)) {
		if (PyObject_GetBuffer(trace_o, &tview, PyBUF_SIMPLE) < 0)
			goto out;
		have_view = 1;
	} else if (!PyUnicode_FSConverter(trace_o, &tpath)) {
		goto out;
	}
	ctx.ts = PyEval_SaveThread();
	if (have_view)
		rc = htr_builder_run_buffer(b, tview.buf, (size_t) tview.len,
					    PyBytes_AS_STRING(out_o), &bs,
					    sizeof(bs));
	else
		rc = htr_builder_run(b, PyBytes_AS_STRING(tpath),
				     PyBytes_AS_STRING(out_o), &bs,
				     sizeof(bs));
	PyEval_RestoreThread(ctx.ts);
	if (ctx.raised) {
		PyErr_Restore(ctx.et, ctx.ev, ctx.tb);
		goto out;
	}
	if (rc < 0) {
		raise_htr(rc, htr_builder_last_error(b));
		goto out;
	}
	r = Py_BuildValue("{sKsKsKsKsKsIsKsisIsisKsKsKsisK}",
			  "insns", bs.insns, "blocks", bs.blocks,
			  "gaps", bs.gaps, "funcs", bs.funcs,
			  "trace_size", bs.trace_size,
			  "max_depth", bs.max_depth, "folded", bs.folded,
			  "timing_unusable", bs.timing_unusable,
			  "threads", bs.threads,
			  "decoder", bs.decoder, "errors", bs.errors,
			  "runaways", bs.runaways,
			  "first_error_offset", bs.first_error_offset,
			  "first_error_code", bs.first_error_code,
			  "commit_ns", bs.commit_ns);
out:
	if (have_view)
		PyBuffer_Release(&tview);
	htr_builder_free(b);
	Py_XDECREF(tpath);
	Py_XDECREF(out_o);
	return r;
}

/* ------------------------------------------------------------------ */
/* htr.build_perf() */

struct perf_ctx {
	struct build_ctx b;     /* first: the progress callback's payload */
	PyObject *warn;         /* callable, or NULL: Python warnings */
	PyObject *built;        /* list of (tid, path) written */
	PyObject *paths;        /* the same paths as bytes, to remove */
};

/* Keep the first exception raised by a callback for after the build. */
static void perf_keep_error(struct perf_ctx *ctx)
{
	if (PyErr_Occurred() && !ctx->b.raised) {
		ctx->b.raised = 1;
		PyErr_Fetch(&ctx->b.et, &ctx->b.ev, &ctx->b.tb);
	}
	PyErr_Clear();
}

/* The builder's progress: stop at once once a callback has raised. */
static int perf_progress(const struct htr_build_progress *p, void *payload)
{
	struct perf_ctx *ctx = payload;

	if (ctx->b.raised)
		return 1;
	return build_progress(p, payload);
}

/* A thread done: note its file (to return it, or to remove it when the
 * build fails later), check for Ctrl-C. */
static int perf_thread_done(const struct htr_perf_result *r, void *payload)
{
	struct perf_ctx *ctx = payload;
	PyObject *t = NULL, *pb = NULL;
	int rc = 0;

	PyEval_RestoreThread(ctx->b.ts);
	if (r->error == 0) {
		pb = PyBytes_FromString(r->out);
		t = Py_BuildValue("(IN)", r->tid,
				  PyUnicode_DecodeFSDefault(r->out));
		if (!pb || !t || PyList_Append(ctx->paths, pb) < 0 ||
		    PyList_Append(ctx->built, t) < 0)
			rc = 1;
	}
	Py_XDECREF(pb);
	Py_XDECREF(t);
	if (!rc && (ctx->b.raised || PyErr_CheckSignals() < 0))
		rc = 1;
	if (rc)
		perf_keep_error(ctx);
	ctx->b.ts = PyEval_SaveThread();
	return rc;
}

static void perf_warning(int kind, const char *text, void *payload)
{
	struct perf_ctx *ctx = payload;
	PyObject *r;

	PyEval_RestoreThread(ctx->b.ts);
	if (!ctx->b.raised) {
		if (ctx->warn) {
			r = PyObject_CallFunction(ctx->warn, "is", kind, text);
			Py_XDECREF(r);
		} else if (kind < HTR_PERF_NOTE) {
			PyErr_WarnEx(PyExc_RuntimeWarning, text, 1);
		}
		perf_keep_error(ctx);
	}
	ctx->b.ts = PyEval_SaveThread();
}

static PyObject *htr_build_perf_fn(PyObject *mod, PyObject *args,
				   PyObject *kw)
{
	static char *kwlist[] = { "path", "output", "tid", "progress",
				  "warning", "threads", "symfs",
				  "buildid_dir", "no_fsync", NULL };
	PyObject *path_o = NULL, *out_o = NULL, *tid_o = Py_None;
	PyObject *progress = Py_None, *warn = Py_None, *r = NULL;
	PyObject *symfs_o = NULL, *bid_o = NULL;
	unsigned threads = 0;
	int no_fsync = 0, rc;
	struct htr_perf *pf = NULL;
	struct htr_perf_build_opts po;
	struct htr_build_opts bo;
	struct perf_ctx ctx;
	Py_ssize_t i;

	(void) mod;
	memset(&ctx, 0, sizeof(ctx));
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O&OOOIO&O&p", kwlist,
					 PyUnicode_FSConverter, &path_o,
					 PyUnicode_FSConverter, &out_o,
					 &tid_o, &progress, &warn, &threads,
					 PyUnicode_FSConverter, &symfs_o,
					 PyUnicode_FSConverter, &bid_o,
					 &no_fsync))
		return NULL;
	if ((progress != Py_None && !PyCallable_Check(progress)) ||
	    (warn != Py_None && !PyCallable_Check(warn))) {
		PyErr_SetString(PyExc_TypeError, "htr: build_perf: progress, "
				"warning: callables");
		goto out;
	}
	ctx.b.cb = progress == Py_None ? NULL : progress;
	ctx.warn = warn == Py_None ? NULL : warn;
	ctx.built = PyList_New(0);
	ctx.paths = PyList_New(0);
	if (!ctx.built || !ctx.paths)
		goto out;
	htr_build_opts_init(&bo);
	bo.progress = perf_progress;
	bo.payload = &ctx;
	bo.threads = threads;
	bo.no_fsync = no_fsync;
	htr_perf_build_opts_init(&po);
	po.build = &bo;
	po.output = out_o ? PyBytes_AS_STRING(out_o) : NULL;
	po.symfs = symfs_o ? PyBytes_AS_STRING(symfs_o) : NULL;
	po.buildid_dir = bid_o ? PyBytes_AS_STRING(bid_o) : NULL;
	po.thread_done = perf_thread_done;
	po.warning = perf_warning;
	po.payload = &ctx;
	if (tid_o != Py_None) {
		unsigned long tid = PyLong_AsUnsignedLong(tid_o);

		if (PyErr_Occurred())
			goto out;
		if (tid > UINT32_MAX) {
			PyErr_SetString(PyExc_OverflowError, "htr: build_perf: "
					"tid: out of range");
			goto out;
		}
		po.flags |= HTR_PERF_BUILD_TID;
		po.tid = (uint32_t) tid;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = htr_perf_open(&pf, PyBytes_AS_STRING(path_o));
	if (rc == 0)
		rc = htr_perf_check(pf, &po);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		raise_htr(rc, pf ? htr_perf_last_error(pf) : NULL);
		goto out;
	}
	ctx.b.ts = PyEval_SaveThread();
	rc = htr_perf_build(pf, &po);
	PyEval_RestoreThread(ctx.b.ts);
	if (ctx.b.raised) {
		PyErr_Restore(ctx.b.et, ctx.b.ev, ctx.b.tb);
	} else if (rc < 0) {
		raise_htr(rc, htr_perf_last_error(pf));
	} else {
		r = ctx.built;
		ctx.built = NULL;
		goto out;
	}
	/* All or nothing: remove the threads' files written before the
	 * failure (the library leaves them). */
	for (i = 0; i < PyList_GET_SIZE(ctx.paths); i++)
		unlink(PyBytes_AS_STRING(PyList_GET_ITEM(ctx.paths, i)));
out:
	htr_perf_close(pf);
	Py_XDECREF(ctx.built);
	Py_XDECREF(ctx.paths);
	Py_XDECREF(path_o);
	Py_XDECREF(out_o);
	Py_XDECREF(symfs_o);
	Py_XDECREF(bid_o);
	return r;
}

static PyObject *htr_errstr_fn(PyObject *mod, PyObject *arg)
{
	long code = PyLong_AsLong(arg);

	(void) mod;
	if (code == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(htr_errstr((int) code));
}

static PyMethodDef htr_methods[] = {
	{ "open", (PyCFunction) (void (*)(void)) htr_open,
	  METH_VARARGS | METH_KEYWORDS,
	  "open(path_or_bytes, verify=False, sidecar=None, no_sidecar=False) "
	  "-> File.  A str or path-like is a path; bytes-like objects are "
	  "the file's contents (read in place when they are an aligned "
	  "bytes object, else copied)." },
	{ "build", (PyCFunction) (void (*)(void)) htr_build_fn,
	  METH_VARARGS | METH_KEYWORDS,
	  "build(trace, out, elf=None, raw=None, progress=None, threads=0, "
	  "cpu=None, mtc_freq=0, nom_freq=0, cpuid_0x15_eax=0, "
	  "cpuid_0x15_ebx=0, no_fsync=False, decoder=None) -> stats dict.  "
	  "trace: a path or bytes.  elf: 'FILE[@BASE]', (path, base) or a "
	  "list of them; raw: 'FILE[:OFF[:SIZE]]@VADDR', (bytes, vaddr[, "
	  "name]) or a list.  progress(p) is called about every 2^20 "
	  "instructions with an htr.Progress; returning False or raising "
	  "cancels the build (nothing is written; the exception, or "
	  "htr.Canceled, comes out).  Ctrl-C cancels too." },
	{ "build_perf", (PyCFunction) (void (*)(void)) htr_build_perf_fn,
	  METH_VARARGS | METH_KEYWORDS,
	  "build_perf(path, output=None, tid=None, progress=None, "
	  "warning=None, threads=0, symfs=None, buildid_dir=None, "
	  "no_fsync=False) -> [(tid, path), ...].  Build every traced thread "
	  "of a perf.data (htr record, perf record -e intel_pt//u) into a "
	  ".htr each, as `htr build FILE.data -o OUTPUT` does (output: NULL "
	  "for STEM.TID.htr, DIR/, a name with %t/%p, or NAME.htr for one "
	  "thread); tid: only that thread.  progress(p) as htr.build's, per "
	  "thread; warning(kind, text) gets the library's warnings and notes "
	  "(without it warnings become RuntimeWarnings).  A cancel (False, an "
	  "exception, Ctrl-C) or a failed thread raises and removes every "
	  "file the call wrote." },
	{ "register_analyzer", (PyCFunction) (void (*)(void))
	  htr_register_analyzer, METH_VARARGS | METH_KEYWORDS,
	  "register_analyzer(name, version, compute, deps=()) -> None.  "
	  "compute(f) gets the open File and returns one uint64 or float64 "
	  "per block (a numpy array or any buffer); f.analysis(name) "
	  "computes it once per sidecar, stores it and reloads it after.  "
	  "Bump version when compute's meaning changes.  deps: analyzers "
	  "computed first (a Python one is readable in compute with "
	  "f.analysis()).  Registering a name again with the same version "
	  "and deps replaces compute." },
	{ "analyzers", (PyCFunction) htr_analyzers_fn, METH_NOARGS,
	  "analyzers() -> the analyzer names: tsc, sym and the registered "
	  "ones" },
	{ "errstr", (PyCFunction) htr_errstr_fn, METH_O,
	  "errstr(code) -> libhtr's phrase for an error code" },
	{ NULL, NULL, 0, NULL },
};

/* The Python side: numpy and pandas glue, imported lazily. */
static const char glue_src[] =
"import os\n"
"def _np():\n"
"    try:\n"
"        import numpy\n"
"    except ImportError:\n"
"        return None\n"
"    return numpy\n"
"_DT = {'Q': '<u8', 'I': '<u4', 'B': 'u1', 'q': '<i8', 'd': '<f8'}\n"
"def _wrap(buf, fmt):\n"
"    np = _np()\n"
"    if np is None:\n"
"        return memoryview(buf)\n"
"    return np.frombuffer(buf, dtype=_DT[fmt])\n"
"BLOCK_FIELDS = ('first_lo', 'first_hi', 'last_lo', 'last_hi', 'parent',\n"
"                'first_child', 'next_sibling', 'nchildren', 'func_flags')\n"
"def block_dtype():\n"
"    '''The numpy dtype of a block record (docs/FORMAT.md, Blocks).'''\n"
"    np = _np()\n"
"    return np.dtype({'names': list(BLOCK_FIELDS),\n"
"                     'formats': ['<u4', '<u2', '<u2', '<u4', '<u4', '<u4',\n"
"                                 '<u4', '<u4', '<u4'],\n"
"                     'offsets': [0, 4, 6, 8, 12, 16, 20, 24, 28],\n"
"                     'itemsize': 32})\n"
"def _blocks(f, rec):\n"
"    np = _np()\n"
"    if np is None:\n"
"        return f._block_seq()\n"
"    return np.frombuffer(rec, dtype=block_dtype())\n"
"def _tsc_points(f):\n"
"    np = _np()\n"
"    rec = f._records(4, 16)\n"
"    if np is None:\n"
"        m = memoryview(rec).cast('Q')\n"
"        return [(m[i], m[i + 1]) for i in range(0, len(m), 2)]\n"
"    return np.frombuffer(rec, dtype=np.dtype([('id', '<u8'),\n"
"                                              ('tsc', '<u8')]))\n"
"def _funcs(f):\n"
"    np = _np()\n"
"    rec = f._records(2, 8)\n"
"    if np is None:\n"
"        return memoryview(rec).cast('Q')\n"
"    return np.frombuffer(rec, dtype='<u8')\n"
"def _sidecar_key(path, sidecar):\n"
"    return os.path.realpath(sidecar if sidecar is not None\n"
"                            else path + '.lmdb')\n"
"def _to_pandas(f, names=True, times=True):\n"
"    import pandas as pd\n"
"    np = _np()\n"
"    c = f.columns()\n"
"    d = {'first': c['first'], 'last': c['last'],\n"
"         'parent': c['parent'], 'level': c['level'],\n"
"         'nchildren': c['nchildren'], 'func': c['func'],\n"
"         'entry': c['entry'], 'flags': c['flags']}\n"
"    if times:\n"
"        t = f.tsc()\n"
"        d['total'] = t['total']\n"
"        d['children'] = t['children']\n"
"        d['local'] = t['local']\n"
"    if names:\n"
"        codes, nm = f.names()\n"
"        d['name'] = pd.Categorical.from_codes(codes.astype(np.int64)\n"
"                                              if np is not None else\n"
"                                              list(codes), nm)\n"
"    df = pd.DataFrame(d)\n"
"    df.index.name = 'block'\n"
"    return df\n";

static struct PyModuleDef htr_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "htr",
	.m_doc = "libhtr's call trees, analyzers and cursor from Python.",
	.m_size = -1,
	.m_methods = htr_methods,
};

PyMODINIT_FUNC PyInit_htr(void)
{
	PyObject *m, *r;
	PyTypeObject *types[] = { &HandleType, &RecordsType, &ArrayType,
				  &StoreType, &FileType, &BlockType,
				  &BlockSeqType, &CursorType };
	size_t i;

	m = PyModule_Create(&htr_module);
	if (!m)
		return NULL;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (PyType_Ready(types[i]) < 0)
			goto fail;
	if (PyStructSequence_InitType2(&InsnType, &insn_desc) < 0 ||
	    PyStructSequence_InitType2(&ProgressType, &progress_desc) < 0)
		goto fail;
	Py_INCREF(&FileType);
	Py_INCREF(&BlockType);
	Py_INCREF(&CursorType);
	Py_INCREF(&InsnType);
	Py_INCREF(&ProgressType);
	if (PyModule_AddObject(m, "File", (PyObject *) &FileType) < 0 ||
	    PyModule_AddObject(m, "Block", (PyObject *) &BlockType) < 0 ||
	    PyModule_AddObject(m, "Cursor", (PyObject *) &CursorType) < 0 ||
	    PyModule_AddObject(m, "Insn", (PyObject *) &InsnType) < 0 ||
	    PyModule_AddObject(m, "Progress", (PyObject *) &ProgressType) < 0)
		goto fail;
	HtrError = PyErr_NewExceptionWithDoc("htr.Error",
		"A libhtr failure: .code (HTR_ERR_*, negative), .errstr (its "
		"phrase), .message (the detailed message).", NULL, NULL);
	if (!HtrError)
		goto fail;
	HtrCanceled = PyErr_NewExceptionWithDoc("htr.Canceled",
		"A build stopped by its progress callback.", HtrError, NULL);
	if (!HtrCanceled)
		goto fail;
	Py_INCREF(HtrError);
	Py_INCREF(HtrCanceled);
	if (PyModule_AddObject(m, "Error", HtrError) < 0 ||
	    PyModule_AddObject(m, "Canceled", HtrCanceled) < 0)
		goto fail;
#define C(n) if (PyModule_AddIntConstant(m, #n, HTR_##n) < 0) goto fail
	C(ERR_INVALID); C(ERR_NOMEM); C(ERR_IO); C(ERR_FORMAT);
	C(ERR_VERSION); C(ERR_CORRUPT); C(ERR_RANGE); C(ERR_NOTFOUND);
	C(ERR_ITEROVER); C(ERR_DECODE); C(ERR_LIMIT); C(ERR_CANCELED);
	C(ERR_CALLBACK);
	C(BLOCK_LATE); C(BLOCK_TRUNCATED); C(BLOCK_GAP); C(BLOCK_IMPLICIT);
	C(BLOCK_UNWOUND);
	C(INSN_OTHER); C(INSN_CALL); C(INSN_RET); C(INSN_JUMP); C(INSN_COND);
	C(INSN_FAR_CALL); C(INSN_FAR_RET); C(INSN_FAR_JUMP);
	C(GAP_DISABLED); C(GAP_OVERFLOW); C(GAP_ERROR);
#undef C
	if (PyModule_AddObject(m, "has_perfetto", PyBool_FromLong(
			htr_export_has(HTR_EXPORT_PERFETTO))) < 0)
		goto fail;
	if (PyModule_AddIntConstant(m, "NONE", (long) HTR_NONE) < 0 ||
	    PyModule_AddStringConstant(m, "__version__", htr_version()) < 0)
		goto fail;
	glue = PyDict_New();
	stores = PyDict_New();
	if (!glue || !stores ||
	    PyDict_SetItemString(glue, "__builtins__", PyEval_GetBuiltins()) < 0)
		goto fail;
	r = PyRun_String(glue_src, Py_file_input, glue, glue);
	if (!r)
		goto fail;
	Py_DECREF(r);
	{
		PyObject *bd = PyDict_GetItemString(glue, "block_dtype");

		Py_XINCREF(bd);
		if (!bd || PyModule_AddObject(m, "block_dtype", bd) < 0)
			goto fail;
	}
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
