/* SPDX-License-Identifier: MIT */
/*
 * The "imagefolder" reader: a tree of image files, one folder per class,
 * indexed exactly as torchvision 0.14's datasets.ImageFolder indexes it,
 * so sample i is the same file with the same label in both.
 *
 *	[dataset imagenet-train]
 *	type = imagefolder
 *	root = /data/imagenet/train	root/<class>/.../<image>
 *	allow_empty = false		(optional) true keeps a class with
 *					no image as a class without samples
 *	follow_symlinks = inside	(optional) inside, all or none
 *	max_directories = 1000000	(optional) caps on the walk
 *	max_files = 20000000
 *
 * The rules (torchvision's find_classes and make_dataset):
 * - the classes are every entry of root that is a directory, following
 *   symlinks, hidden ones included, sorted by code point (for UTF-8 the
 *   bytes' order); class_to_idx is the position in that list;
 * - under each class, os.walk(followlinks=True) lists every directory;
 *   they are sorted by their whole path string ("a/sub" < "a/sub-2" <
 *   "a/sub.1" < "a/sub/x" < "a/sub_z"), and the files of each by name;
 * - a file is kept when its path, lowercased, ends with one of
 *   IMAGEFOLDER_EXTENSIONS (whatever its content: the decoder sniffs it);
 * - directories that cannot be read are skipped without a word, as
 *   os.walk does; a class without any image file is an error naming all
 *   such classes, in torchvision's words, unless allow_empty.
 * Where infeed differs, it refuses rather than guess: a name that is not
 * valid UTF-8 (Python would sort it as surrogates, not bytes), a symlink
 * cycle (os.walk would loop forever) and a directory reached twice under
 * one class (os.walk lists it twice; a chain of such links doubles the walk
 * at each level) are errors, and so is a walk past max_directories or
 * max_files.
 *
 * Symlinks: whoever can write into the tree must not make infeedd read
 * what they cannot (another dataset's files, closed by allow_groups, are
 * readable by infeedd).  With follow_symlinks = inside (the default) a
 * link is followed only when what it leads to lies inside root, resolved,
 * and one leading out is an error naming it; with none any link that
 * would be a class, a directory or an image is an error; all follows every
 * link as torchvision does.  The same rule holds when a worker opens an
 * image: a link swapped in after indexing is refused (EXDEV) then too.
 *
 * The index is one string table of paths relative to root, an offset per
 * sample into it and a label per sample: about 40 bytes a sample for
 * ImageNet's 1.28 million files, and no descriptor or allocation per
 * file.  The root directory's descriptor is kept; a worker opens each file
 * relative to it, reads it with pread and closes it.
 */

#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/openat2.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "number.h"
#include "reader-imagefolder.h"
#include "utf8.h"

/* Deeper than this under a class is refused (a cycle guard besides). */
#define IMAGEFOLDER_MAX_DEPTH	128
/* Empty classes the error message names before "and N more". */
#define IMAGEFOLDER_MAX_NAMED	50
/* The defaults of max_directories and max_files. */
#define IMAGEFOLDER_MAX_DIRS	1000000
#define IMAGEFOLDER_MAX_FILES	20000000

/* follow_symlinks. */
enum imagefolder_follow {
	FOLLOW_INSIDE,
	FOLLOW_ALL,
	FOLLOW_NONE,
};

/* What a directory entry is to the walk. */
enum imagefolder_kind {
	KIND_SKIP,
	KIND_DIR,
	KIND_FILE,
};

#define IMAGEFOLDER_EXTENSIONS \
	".jpg, .jpeg, .png, .ppm, .bmp, .pgm, .tif, .tiff, .webp"

static const char *const imagefolder_exts[] = {
	".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff",
	".webp", NULL
};

/* What an open imagefolder dataset holds. */
struct imagefolder {
	int		 rootfd;
	char		*root;		/* as configured, for messages */
	char		*realroot;	/* resolved, for follow_symlinks */
	int		 follow;	/* enum imagefolder_follow */
	char		*strtab;	/* "class/dir/file\0" per sample */
	size_t		 strlen;
	size_t		 strcap;
	uint64_t	*off;		/* each sample's path in strtab */
	uint32_t	*label;
	uint64_t	 cap;		/* of off and label */
};

/* A byte arena of NUL-terminated strings, addressed by offset. */
struct arena {
	char	*p;
	size_t	 len;
	size_t	 cap;
};

/* A directory found under the class being walked, and its image files. */
struct wdir {
	size_t	path;		/* in walk.dirs */
	size_t	first;		/* its files: walk.files[first .. first+n) */
	size_t	n;
};

/* The walk of one class: everything is reused from class to class. */
struct walk {
	struct dataset	*ds;
	struct imagefolder *f;
	char		**cause;
	struct arena	 dirs;		/* directory paths relative to root */
	struct wdir	*dv;
	size_t		 nd;
	size_t		 cd;
	struct arena	 names;		/* kept file names */
	size_t		*files;		/* offsets into names */
	size_t		 nf;
	size_t		 cf;
	struct {
		dev_t	dev;
		ino_t	ino;
	}		 stack[IMAGEFOLDER_MAX_DEPTH];
	unsigned	 depth;
	struct wseen	*seen;		/* the class's directories, hashed */
	size_t		 nseen;
	size_t		 cseen;		/* a power of two */
	uint64_t	 ndirs;		/* walked in the whole dataset */
	uint64_t	 nfiles;
	uint64_t	 max_dirs;
	uint64_t	 max_files;
};

/* A directory already walked under the current class. */
struct wseen {
	dev_t	dev;
	ino_t	ino;
	size_t	path;		/* in walk.dirs; SIZE_MAX: an empty slot */
};

static int	imagefolder_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	imagefolder_locate(const struct dataset *, uint64_t,
		    struct dataset_loc *, int64_t *);
static int	imagefolder_read(const struct dataset *, uint64_t,
		    struct dataset_buf *, int64_t *);
static char	*imagefolder_where(const struct dataset *, uint64_t, char *,
		    size_t);
static void	imagefolder_close(struct dataset *);

const struct dataset_ops dataset_imagefolder_ops = {
	.type = "imagefolder",
	.keys = (const char *const []){ "root", "allow_empty",
	    "follow_symlinks", "max_directories", "max_files", NULL },
	.data_key = "root",
	.open = imagefolder_open,
	.close = imagefolder_close,
	.read_encoded = imagefolder_read,
	.locate = imagefolder_locate,
	.sample_where = imagefolder_where,
};

/* Append @len bytes of @s and a NUL; *@off is where they went. */
static int
arena_add(struct arena *a, const char *s, size_t len, size_t *off)
{
	size_t	 cap;
	char	*p;

	if (a->len + len + 1 > a->cap) {
		cap = a->cap == 0 ? 4096 : a->cap;
		while (cap < a->len + len + 1)
			cap *= 2;
		if ((p = realloc(a->p, cap)) == NULL)
			return (-1);
		a->p = p;
		a->cap = cap;
	}
	memcpy(a->p + a->len, s, len);
	a->p[a->len + len] = '\0';
	*off = a->len;
	a->len += len + 1;
	return (0);
}

/* Grow an array of @size-byte elements to hold @n + 1. */
static int
grow(void *pp, size_t *cap, size_t n, size_t size)
{
	void	**p = pp, *q;
	size_t	  c;

	if (n < *cap)
		return (0);
	c = *cap == 0 ? 64 : *cap * 2;
	if ((q = reallocarray(*p, c, size)) == NULL)
		return (-1);
	*p = q;
	*cap = c;
	return (0);
}

/* Does @name, lowercased, end with one of the image extensions? */
static int
imagefolder_is_image(const char *name)
{
	const char *const *e;
	size_t		 nl = strlen(name), el, i;
	char		 c;

	for (e = imagefolder_exts; *e != NULL; e++) {
		el = strlen(*e);
		if (nl < el)
			continue;
		for (i = 0; i < el; i++) {
			c = name[nl - el + i];
			if (c >= 'A' && c <= 'Z')
				c += 'a' - 'A';
			if (c != (*e)[i])
				break;
		}
		if (i == el)
			return (1);
	}
	return (0);
}

/* "root/rel" as torchvision's os.path.join writes it, cleaned for a log. */
static char *
imagefolder_path(const struct imagefolder *f, const char *rel, char *buf,
    size_t len)
{
	size_t	 rl = strlen(f->root);
	char	*full, *clean;

	buf[0] = '\0';
	if (asprintf(&full, "%s%s%s", f->root, rl > 0 &&
	    f->root[rl - 1] == '/' ? "" : "/", rel) == -1)
		return (buf);
	if ((clean = utf8_clean(full, len > 0 ? len - 1 : 0)) != NULL) {
		snprintf(buf, len, "%s", clean);
		free(clean);
	}
	free(full);
	return (buf);
}

/*
 * Where open descriptor @fd lies: 1 inside the resolved root, 0 outside,
 * -1 with errno when the kernel cannot say (no /proc).
 */
static int
imagefolder_fd_inside(const struct imagefolder *f, int fd)
{
	char	link[64], got[PATH_MAX + 1];
	size_t	rl = strlen(f->realroot);
	ssize_t	n;

	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, got, sizeof got - 1)) == -1)
		return (-1);
	got[n] = '\0';
	if (strcmp(f->realroot, "/") == 0)
		return (1);
	return (strncmp(got, f->realroot, rl) == 0 &&
	    (got[rl] == '/' || got[rl] == '\0'));
}

/*
 * What entry @de of directory @d (at @dir under root) is: a directory to
 * walk (os.scandir's is_dir(): a directory or a link to one), a file, or
 * nothing for the walk; a symlink that follow_symlinks refuses is an error
 * when it would be a class, a directory or an image.
 */
static int
imagefolder_kind(const struct imagefolder *f, struct dataset *ds,
    char **cause, DIR *d, const char *dir, const struct dirent *de,
    enum imagefolder_kind *kind)
{
	struct stat	 st;
	char		 rel[PATH_MAX + 256], where[1024];
	int		 pfd, in, isdir;

	*kind = KIND_FILE;
	if (de->d_type == DT_DIR) {
		*kind = KIND_DIR;
		return (0);
	}
	if (de->d_type == DT_UNKNOWN) {
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		    -1)
			return (0);
		if (S_ISDIR(st.st_mode))
			*kind = KIND_DIR;
		if (!S_ISLNK(st.st_mode))
			return (0);
	} else if (de->d_type != DT_LNK)
		return (0);

	/* A symlink. */
	isdir = fstatat(dirfd(d), de->d_name, &st, 0) == 0 &&
	    S_ISDIR(st.st_mode);
	if (isdir)
		*kind = KIND_DIR;
	if (f->follow == FOLLOW_ALL)
		return (0);
	if (!isdir && (*dir == '\0' || !imagefolder_is_image(de->d_name))) {
		*kind = KIND_SKIP;
		return (0);
	}
	snprintf(rel, sizeof rel, "%s%s%s", dir, *dir != '\0' ? "/" : "",
	    de->d_name);
	if (f->follow == FOLLOW_NONE)
		return (dataset_error(cause, ds, "'%s' is a symlink, and "
		    "'follow_symlinks = none' refuses every link in the tree; "
		    "replace it with what it points to, or set "
		    "'follow_symlinks = inside' (links within root) or 'all'",
		    imagefolder_path(f, rel, where, sizeof where)));
	/* A dangling link is a file that fails when read, as in torchvision. */
	if ((pfd = openat(dirfd(d), de->d_name, O_PATH | O_CLOEXEC)) == -1)
		return (0);
	in = imagefolder_fd_inside(f, pfd);
	close(pfd);
	if (in == 1)
		return (0);
	if (in == -1)
		return (dataset_error(cause, ds, "'%s' is a symlink, and "
		    "where it leads cannot be checked (/proc/self/fd: %s) for "
		    "'follow_symlinks = inside'; mount /proc, or set "
		    "'follow_symlinks = all' if every writer of the tree may "
		    "read all that infeedd can", imagefolder_path(f, rel,
		    where, sizeof where), strerror(errno)));
	return (dataset_error(cause, ds, "'%s' is a symlink that leads out "
	    "of root (%s), which 'follow_symlinks = inside' (the default) "
	    "refuses: whoever can write into the tree could otherwise make "
	    "infeedd read files they cannot; move the target inside root, or "
	    "set 'follow_symlinks = all' if every writer of the tree may read "
	    "all that infeedd can", imagefolder_path(f, rel, where,
	    sizeof where), f->realroot));
}

/*
 * Record directory @dev/@ino, at @path in w->dirs, as walked under this
 * class; its earlier path when it was walked already, else NULL.
 */
static const char *
imagefolder_seen(struct walk *w, dev_t dev, ino_t ino, size_t path,
    int *nomem)
{
	struct wseen	*t;
	size_t		 i, c, h;

	*nomem = 0;
	if (2 * (w->nseen + 1) > w->cseen) {
		c = w->cseen == 0 ? 256 : w->cseen * 2;
		if ((t = calloc(c, sizeof *t)) == NULL) {
			*nomem = 1;
			return (NULL);
		}
		for (i = 0; i < c; i++)
			t[i].path = SIZE_MAX;
		for (i = 0; i < w->cseen; i++) {
			if (w->seen[i].path == SIZE_MAX)
				continue;
			h = ((uint64_t)w->seen[i].ino * 0x9e3779b97f4a7c15ULL ^
			    (uint64_t)w->seen[i].dev) & (c - 1);
			while (t[h].path != SIZE_MAX)
				h = (h + 1) & (c - 1);
			t[h] = w->seen[i];
		}
		free(w->seen);
		w->seen = t;
		w->cseen = c;
	}
	h = ((uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev) &
	    (w->cseen - 1);
	while (w->seen[h].path != SIZE_MAX) {
		if (w->seen[h].dev == dev && w->seen[h].ino == ino)
			return (w->dirs.p + w->seen[h].path);
		h = (h + 1) & (w->cseen - 1);
	}
	w->seen[h].dev = dev;
	w->seen[h].ino = ino;
	w->seen[h].path = path;
	w->nseen++;
	return (NULL);
}

/* Forget the directories of the last class. */
static void
imagefolder_seen_clear(struct walk *w)
{
	size_t	i;

	for (i = 0; i < w->cseen; i++)
		w->seen[i].path = SIZE_MAX;
	w->nseen = 0;
}

/* Refuse a name Python would sort differently from its bytes. */
static int
imagefolder_check_name(struct walk *w, const char *dir, const char *name)
{
	char	rel[PATH_MAX + 256], where[1024];

	if (utf8_valid(name, strlen(name)))
		return (0);
	snprintf(rel, sizeof rel, "%s%s%s", dir, *dir != '\0' ? "/" : "",
	    name);
	return (dataset_error(w->cause, w->ds, "'%s': the name is not valid "
	    "UTF-8; torchvision's ImageFolder would sort it by the surrogate "
	    "characters Python makes of it, not by its bytes, so the order "
	    "of the samples would differ: rename it",
	    imagefolder_path(w->f, rel, where, sizeof where)));
}

/*
 * Walk directory @path (relative to root) as os.walk(followlinks=True)
 * does: record it and its image files, then its subdirectories, each
 * listed in full before descending (no descriptor is held meanwhile).
 */
static int
imagefolder_walk(struct walk *w, const char *path)
{
	struct stat	 st;
	struct arena	 subs = { 0 };
	struct dirent	*de;
	DIR		*d;
	enum imagefolder_kind kind;
	const char	*seen;
	size_t		 off, di, i, plen = strlen(path);
	char		 child[PATH_MAX], where[1024], twice[1024];
	unsigned	 k;
	int		 fd, rc = -1, nomem;

	if (!dataset_open_tick())
		return (dataset_error(w->cause, w->ds, DATASET_OPEN_STOPPED));
	/* Unreadable directories are skipped, as os.walk skips them. */
	if ((fd = openat(w->f->rootfd, path, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | O_NOCTTY)) == -1)
		return (0);
	if (fstat(fd, &st) == -1) {
		close(fd);
		return (0);
	}
	for (k = 0; k < w->depth; k++) {
		if (w->stack[k].dev == st.st_dev &&
		    w->stack[k].ino == st.st_ino) {
			close(fd);
			return (dataset_error(w->cause, w->ds, "'%s' is a "
			    "symlink cycle: it leads back to a directory "
			    "above it, and torchvision's ImageFolder (os.walk "
			    "following links) would never finish; remove the "
			    "link", imagefolder_path(w->f, path, where,
			    sizeof where)));
		}
	}
	if (w->depth == IMAGEFOLDER_MAX_DEPTH) {
		close(fd);
		return (dataset_error(w->cause, w->ds, "'%s' lies more than %d "
		    "directories deep under its class folder; is there a "
		    "symlink loop?", imagefolder_path(w->f, path, where,
		    sizeof where), IMAGEFOLDER_MAX_DEPTH));
	}
	if (++w->ndirs > w->max_dirs) {
		close(fd);
		return (dataset_error(w->cause, w->ds, "the walk of root %s "
		    "passed max_directories = %" PRIu64 " directories (at "
		    "'%s'); raise max_directories for this dataset if the tree "
		    "really holds that many, or look for symlinks that "
		    "multiply it", w->f->root, w->max_dirs, imagefolder_path(
		    w->f, path, where, sizeof where)));
	}
	if (arena_add(&w->dirs, path, plen, &off) != 0) {
		close(fd);
		return (dataset_error(w->cause, w->ds, "%s",
		    strerror(ENOMEM)));
	}
	if ((seen = imagefolder_seen(w, st.st_dev, st.st_ino, off,
	    &nomem)) != NULL || nomem) {
		close(fd);
		if (nomem)
			return (dataset_error(w->cause, w->ds, "%s",
			    strerror(ENOMEM)));
		imagefolder_path(w->f, seen, twice, sizeof twice);
		return (dataset_error(w->cause, w->ds, "'%s' is the directory "
		    "'%s' again, reached twice under one class through "
		    "symlinks: torchvision's ImageFolder would list its images "
		    "twice, and a chain of such links doubles the walk at "
		    "every level; remove one of the links", imagefolder_path(
		    w->f, path, where, sizeof where), twice));
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return (0);
	}
	w->stack[w->depth].dev = st.st_dev;
	w->stack[w->depth].ino = st.st_ino;
	w->depth++;

	if (grow(&w->dv, &w->cd, w->nd, sizeof *w->dv) != 0)
		goto nomem;
	di = w->nd++;
	w->dv[di].path = off;
	w->dv[di].first = w->nf;
	w->dv[di].n = 0;
	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL)
			break;
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (imagefolder_kind(w->f, w->ds, w->cause, d, path, de,
		    &kind) != 0)
			goto out;
		if (kind != KIND_DIR && ++w->nfiles > w->max_files) {
			dataset_error(w->cause, w->ds, "the walk of root %s "
			    "passed max_files = %" PRIu64 " files (in '%s'); "
			    "raise max_files for this dataset if the tree "
			    "really holds that many", w->f->root,
			    w->max_files, imagefolder_path(w->f, path, where,
			    sizeof where));
			goto out;
		}
		if (kind == KIND_DIR) {
			if (imagefolder_check_name(w, path, de->d_name) != 0)
				goto out;
			if (arena_add(&subs, de->d_name, strlen(de->d_name),
			    &off) != 0)
				goto nomem;
		} else if (kind == KIND_FILE &&
		    imagefolder_is_image(de->d_name)) {
			if (imagefolder_check_name(w, path, de->d_name) != 0)
				goto out;
			if (grow(&w->files, &w->cf, w->nf,
			    sizeof *w->files) != 0 ||
			    arena_add(&w->names, de->d_name,
			    strlen(de->d_name), &w->files[w->nf]) != 0)
				goto nomem;
			w->nf++;
			w->dv[di].n++;
		}
	}
	if (errno != 0) {
		/* os.walk drops a directory it cannot list to the end. */
		w->nf = w->dv[di].first;
		w->nd = di;
		closedir(d);
		d = NULL;
		subs.len = 0;
	}
	if (d != NULL)
		closedir(d);
	d = NULL;
	for (i = 0; i < subs.len; i += strlen(subs.p + i) + 1) {
		/* os.walk would fail on a path this long, and skip it. */
		if (snprintf(child, sizeof child, "%s/%s", path,
		    subs.p + i) >= (int)sizeof child)
			continue;
		if (imagefolder_walk(w, child) != 0)
			goto out;
	}
	rc = 0;
	goto out;
nomem:
	dataset_error(w->cause, w->ds, "%s", strerror(ENOMEM));
out:
	if (d != NULL)
		closedir(d);
	free(subs.p);
	w->depth--;
	return (rc);
}

/* qsort_r's comparison of two offsets into one arena's strings. */
static int
imagefolder_cmp_off(const void *a, const void *b, void *arg)
{
	const char	*base = arg;

	return (strcmp(base + *(const size_t *)a, base + *(const size_t *)b));
}

/* ... and of two directories by their whole path. */
static int
imagefolder_cmp_dir(const void *a, const void *b, void *arg)
{
	const char	*base = arg;

	return (strcmp(base + ((const struct wdir *)a)->path,
	    base + ((const struct wdir *)b)->path));
}

/* Walk class @c, then add its files to the index in torchvision's order. */
static int
imagefolder_class(struct walk *w, uint32_t c, uint64_t *n)
{
	struct imagefolder	*f = w->f;
	const char		*name = w->ds->class_names[c], *dir, *file;
	size_t			 i, j, dl, fl, need, cap;
	uint64_t		 ncap;
	void			*p;

	w->dirs.len = w->names.len = 0;
	w->nd = w->nf = 0;
	w->depth = 0;
	imagefolder_seen_clear(w);
	if (imagefolder_walk(w, name) != 0)
		return (-1);
	if (w->nd > 1)
		qsort_r(w->dv, w->nd, sizeof *w->dv, imagefolder_cmp_dir,
		    w->dirs.p);
	*n = 0;
	for (i = 0; i < w->nd; i++) {
		if (w->dv[i].n > 1)
			qsort_r(w->files + w->dv[i].first, w->dv[i].n,
			    sizeof *w->files, imagefolder_cmp_off,
			    w->names.p);
		dir = w->dirs.p + w->dv[i].path;
		dl = strlen(dir);
		for (j = 0; j < w->dv[i].n; j++) {
			file = w->names.p + w->files[w->dv[i].first + j];
			fl = strlen(file);
			need = f->strlen + dl + 1 + fl + 1;
			if (need > f->strcap) {
				cap = f->strcap == 0 ? 65536 : f->strcap;
				while (cap < need)
					cap *= 2;
				if ((p = realloc(f->strtab, cap)) == NULL)
					goto nomem;
				f->strtab = p;
				f->strcap = cap;
			}
			if (w->ds->samples == f->cap) {
				ncap = f->cap == 0 ? 1024 : f->cap * 2;
				if ((p = reallocarray(f->off, ncap,
				    sizeof *f->off)) == NULL)
					goto nomem;
				f->off = p;
				if ((p = reallocarray(f->label, ncap,
				    sizeof *f->label)) == NULL)
					goto nomem;
				f->label = p;
				f->cap = ncap;
			}
			f->off[w->ds->samples] = f->strlen;
			f->label[w->ds->samples] = c;
			w->ds->samples++;
			memcpy(f->strtab + f->strlen, dir, dl);
			f->strtab[f->strlen + dl] = '/';
			memcpy(f->strtab + f->strlen + dl + 1, file, fl + 1);
			f->strlen = need;
			(*n)++;
		}
	}
	return (0);
nomem:
	return (dataset_error(w->cause, w->ds, "%s", strerror(ENOMEM)));
}

/* find_classes(): every directory in root, sorted by code point. */
static int
imagefolder_classes(struct dataset *ds, struct imagefolder *f, char **cause)
{
	enum imagefolder_kind kind;
	struct arena	 names = { 0 };
	struct dirent	*de;
	size_t		*offs = NULL, n = 0, cap = 0, i;
	DIR		*d;
	int		 fd, rc = -1;
	char		 where[1024];

	if ((fd = dup(f->rootfd)) == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return (dataset_error(cause, ds, "'root = %s': cannot list "
		    "it: %s", f->root, strerror(errno)));
	}
	rewinddir(d);
	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL)
			break;
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (imagefolder_kind(f, ds, cause, d, "", de, &kind) != 0)
			goto out;
		if (kind != KIND_DIR)
			continue;
		if (!utf8_valid(de->d_name, strlen(de->d_name))) {
			dataset_error(cause, ds, "class folder '%s': the name "
			    "is not valid UTF-8; torchvision's ImageFolder "
			    "would sort it by the surrogate characters Python "
			    "makes of it, not by its bytes, so the class "
			    "numbers would differ: rename it",
			    imagefolder_path(f, de->d_name, where,
			    sizeof where));
			goto out;
		}
		if (n == UINT32_MAX - 1) {
			dataset_error(cause, ds, "'root = %s' holds too many "
			    "class folders", f->root);
			goto out;
		}
		if (grow(&offs, &cap, n, sizeof *offs) != 0 ||
		    arena_add(&names, de->d_name, strlen(de->d_name),
		    &offs[n]) != 0)
			goto nomem;
		n++;
	}
	if (errno != 0) {
		dataset_error(cause, ds, "'root = %s': cannot list it: %s",
		    f->root, strerror(errno));
		goto out;
	}
	if (n == 0) {
		dataset_error(cause, ds, "Couldn't find any class folder in "
		    "%s.", f->root);
		goto out;
	}
	qsort_r(offs, n, sizeof *offs, imagefolder_cmp_off, names.p);
	if ((ds->class_names = calloc(n, sizeof *ds->class_names)) == NULL)
		goto nomem;
	ds->classes = (uint32_t)n;
	for (i = 0; i < n; i++) {
		if ((ds->class_names[i] = strdup(names.p + offs[i])) == NULL)
			goto nomem;
	}
	rc = 0;
	goto out;
nomem:
	dataset_error(cause, ds, "%s", strerror(ENOMEM));
out:
	closedir(d);
	free(names.p);
	free(offs);
	return (rc);
}

/* torchvision's message for classes without a file, and infeed's advice. */
static int
imagefolder_empty_error(struct dataset *ds, const uint8_t *empty,
    char **cause)
{
	char		*list = NULL, *t;
	uint32_t	 c, named = 0, more = 0;

	for (c = 0; c < ds->classes; c++) {
		if (!empty[c])
			continue;
		if (named == IMAGEFOLDER_MAX_NAMED) {
			more++;
			continue;
		}
		if (asprintf(&t, "%s%s%s", list != NULL ? list : "",
		    list != NULL ? ", " : "", ds->class_names[c]) == -1) {
			free(list);
			return (dataset_error(cause, ds, "%s",
			    strerror(ENOMEM)));
		}
		free(list);
		list = t;
		named++;
	}
	if (more > 0) {
		if (asprintf(&t, "%s and %" PRIu32 " more", list, more) == -1) {
			free(list);
			return (dataset_error(cause, ds, "%s",
			    strerror(ENOMEM)));
		}
		free(list);
		list = t;
	}
	dataset_error(cause, ds, "Found no valid file for the classes %s. "
	    "Supported extensions are: " IMAGEFOLDER_EXTENSIONS " (set "
	    "'allow_empty = true' to keep such classes without samples)",
	    list);
	free(list);
	return (-1);
}

/* Read the keys, list the classes and index every image under them. */
static int
imagefolder_open(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	struct imagefolder	*f;
	struct walk		 w;
	const char		*root, *v;
	char			*p;
	uint8_t			*empty = NULL;
	const char		*errstr;
	uint64_t		 n;
	uint32_t		 c;
	int			 allow_empty = 0, any_empty = 0;

	if ((f = calloc(1, sizeof *f)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	f->rootfd = -1;
	ds->priv = f;
	ds->encoded = true;
	ds->label_dtype = INFEED_DTYPE_INT64;
	memset(&w, 0, sizeof w);

	if ((root = dataset_conf_need(ds, conf, "root", "the folder that "
	    "holds one folder of images per class", cause)) == NULL)
		goto fail;
	if ((v = dataset_conf_get(conf, "allow_empty")) != NULL) {
		if (strcmp(v, "true") == 0)
			allow_empty = 1;
		else if (strcmp(v, "false") != 0) {
			dataset_error(cause, ds, "'allow_empty = %s': expected "
			    "true or false", v);
			goto fail;
		}
	}
	f->follow = FOLLOW_INSIDE;
	if ((v = dataset_conf_get(conf, "follow_symlinks")) != NULL) {
		if (strcmp(v, "all") == 0)
			f->follow = FOLLOW_ALL;
		else if (strcmp(v, "none") == 0)
			f->follow = FOLLOW_NONE;
		else if (strcmp(v, "inside") != 0) {
			dataset_error(cause, ds, "'follow_symlinks = %s': "
			    "expected inside (links whose target lies inside "
			    "root, the default), all (every link, as "
			    "torchvision) or none", v);
			goto fail;
		}
	}
	w.max_dirs = IMAGEFOLDER_MAX_DIRS;
	w.max_files = IMAGEFOLDER_MAX_FILES;
	if ((v = dataset_conf_get(conf, "max_directories")) != NULL &&
	    number_parse_u64(v, 1, UINT32_MAX, &w.max_dirs, &errstr) != 0) {
		dataset_error(cause, ds, "'max_directories = %s': %s; "
		    "expected 1 to %u (the default is %u)", v, errstr,
		    UINT32_MAX, IMAGEFOLDER_MAX_DIRS);
		goto fail;
	}
	if ((v = dataset_conf_get(conf, "max_files")) != NULL &&
	    number_parse_u64(v, 1, UINT32_MAX, &w.max_files, &errstr) != 0) {
		dataset_error(cause, ds, "'max_files = %s': %s; expected 1 to "
		    "%u (the default is %u)", v, errstr, UINT32_MAX,
		    IMAGEFOLDER_MAX_FILES);
		goto fail;
	}
	if ((f->root = strdup(root)) == NULL) {
		dataset_error(cause, ds, "%s", strerror(ENOMEM));
		goto fail;
	}
	if ((f->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
	    O_NOCTTY)) == -1) {
		dataset_error(cause, ds, "'root = %s': %s; expected a folder "
		    "of class folders (root/<class>/<image>)", root,
		    strerror(errno));
		goto fail;
	}
	if ((f->realroot = realpath(root, NULL)) == NULL) {
		dataset_error(cause, ds, "'root = %s': cannot resolve it: %s",
		    root, strerror(errno));
		goto fail;
	}
	if (imagefolder_classes(ds, f, cause) != 0)
		goto fail;

	if ((empty = calloc(ds->classes, 1)) == NULL) {
		dataset_error(cause, ds, "%s", strerror(ENOMEM));
		goto fail;
	}
	w.ds = ds;
	w.f = f;
	w.cause = cause;
	for (c = 0; c < ds->classes; c++) {
		if (imagefolder_class(&w, c, &n) != 0)
			goto fail;
		if (n == 0) {
			empty[c] = 1;
			any_empty = 1;
		}
	}
	if (any_empty && !allow_empty) {
		imagefolder_empty_error(ds, empty, cause);
		goto fail;
	}
	if (ds->samples == 0) {
		dataset_error(cause, ds, "no image file (" IMAGEFOLDER_EXTENSIONS
		    ") in any class folder of %s; a dataset needs at least "
		    "one sample", root);
		goto fail;
	}
	/* Give back what doubling left over: the index stays for long. */
	if ((p = realloc(f->strtab, f->strlen)) != NULL) {
		f->strtab = p;
		f->strcap = f->strlen;
	}
	free(empty);
	free(w.dirs.p);
	free(w.dv);
	free(w.names.p);
	free(w.files);
	free(w.seen);
	return (0);

fail:
	free(empty);
	free(w.dirs.p);
	free(w.dv);
	free(w.names.p);
	free(w.files);
	free(w.seen);
	imagefolder_close(ds);
	return (-1);
}

/* openat2(2), which glibc may not wrap. */
static int
imagefolder_openat2(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how	how;

	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)flags;
	how.resolve = resolve;
	return ((int)syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

/* @rel under root with no symlink anywhere on the way (none). */
static int
imagefolder_open_nofollow(const struct imagefolder *f, const char *rel,
    int flags)
{
	char		 comp[NAME_MAX + 1];
	const char	*p = rel, *slash;
	int		 dir, fd, saved;

	fd = imagefolder_openat2(f->rootfd, rel, flags, RESOLVE_BENEATH |
	    RESOLVE_NO_SYMLINKS);
	if (fd != -1 || (errno != ENOSYS && errno != EPERM &&
	    errno != E2BIG && errno != EAGAIN))
		return (fd == -1 && errno == ELOOP ? (errno = EXDEV, -1) : fd);
	/* No openat2: one component at a time, none of them a link. */
	if ((dir = dup(f->rootfd)) == -1)
		return (-1);
	while ((slash = strchr(p, '/')) != NULL) {
		if ((size_t)(slash - p) > NAME_MAX) {
			close(dir);
			errno = ENAMETOOLONG;
			return (-1);
		}
		memcpy(comp, p, (size_t)(slash - p));
		comp[slash - p] = '\0';
		fd = openat(dir, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		saved = errno;
		close(dir);
		if (fd == -1) {
			errno = saved == ELOOP || saved == ENOTDIR ? EXDEV :
			    saved;
			return (-1);
		}
		dir = fd;
		p = slash + 1;
	}
	fd = openat(dir, p, flags | O_NOFOLLOW);
	saved = errno;
	close(dir);
	if (fd == -1)
		errno = saved == ELOOP ? EXDEV : saved;
	return (fd);
}

/* @rel under root, through links that stay inside it (inside). */
static int
imagefolder_open_inside(const struct imagefolder *f, const char *rel,
    int flags)
{
	char	link[64];
	int	pfd, fd, in, saved;

	/* Relative links that stay beneath root: the kernel checks. */
	fd = imagefolder_openat2(f->rootfd, rel, flags, RESOLVE_BENEATH |
	    RESOLVE_NO_MAGICLINKS);
	if (fd != -1 || errno == ENOENT || errno == EACCES)
		return (fd);
	/*
	 * Absolute links (which RESOLVE_BENEATH refuses) or no openat2:
	 * resolve without opening (O_PATH), check where it landed, then
	 * open that very file.
	 */
	if ((pfd = openat(f->rootfd, rel, O_PATH | O_CLOEXEC)) == -1)
		return (-1);
	if ((in = imagefolder_fd_inside(f, pfd)) != 1) {
		close(pfd);
		errno = in == 0 ? EXDEV : EACCES;
		return (-1);
	}
	snprintf(link, sizeof link, "/proc/self/fd/%d", pfd);
	fd = open(link, flags);
	saved = errno;
	close(pfd);
	errno = saved;
	return (fd);
}

/*
 * Open image @index (as follow_symlinks allows) and say how long it is:
 * the caller reads it and closes the descriptor.
 */
static int
imagefolder_locate(const struct dataset *ds, uint64_t index,
    struct dataset_loc *loc, int64_t *label)
{
	const struct imagefolder	*f = ds->priv;
	const char			*rel = f->strtab + f->off[index];
	struct stat			 st;
	int				 fd, saved, flags;

	flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	if (f->follow == FOLLOW_INSIDE)
		fd = imagefolder_open_inside(f, rel, flags);
	else if (f->follow == FOLLOW_NONE)
		fd = imagefolder_open_nofollow(f, rel, flags);
	else
		fd = openat(f->rootfd, rel, flags);
	if (fd == -1)
		return (-1);
	if (fstat(fd, &st) == -1)
		goto fail;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto fail;
	}
	if ((uint64_t)st.st_size > INFEED_MAX_IMAGE_BYTES) {
		errno = EFBIG;
		goto fail;
	}
	/*
	 * O_NONBLOCK was for the open (a FIFO put in its place); io_uring
	 * would answer a read of a regular file that is not cached with
	 * EAGAIN rather than wait for it.
	 */
	if (fcntl(fd, F_SETFL, O_RDONLY) == -1)
		goto fail;
	loc->fd = fd;
	loc->off = 0;
	loc->len = (size_t)st.st_size;
	loc->mapped = NULL;
	loc->map = NULL;
	loc->owned = true;
	*label = f->label[index];
	return (0);
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return (-1);
}

/* Read image @index whole. */
static int
imagefolder_read(const struct dataset *ds, uint64_t index,
    struct dataset_buf *buf, int64_t *label)
{
	struct dataset_loc	 loc;
	size_t			 got = 0;
	ssize_t			 r;
	int			 saved;

	if (imagefolder_locate(ds, index, &loc, label) == -1)
		return (-1);
	if (dataset_buf_reserve(buf, loc.len) != 0)
		goto fail;
	while (got < loc.len) {
		r = pread(loc.fd, buf->p + got, loc.len - got, (off_t)got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			goto fail;
		if (r == 0) {
			errno = EIO;	/* cut while we read it */
			goto fail;
		}
		got += (size_t)r;
	}
	close(loc.fd);
	buf->len = got;
	return (0);
fail:
	saved = errno;
	close(loc.fd);
	errno = saved;
	return (-1);
}

/* "'/data/train/n01/x.JPEG'". */
static char *
imagefolder_where(const struct dataset *ds, uint64_t index, char *buf,
    size_t len)
{
	const struct imagefolder	*f = ds->priv;
	char				 path[PATH_MAX + 1024];

	imagefolder_path(f, f->strtab + f->off[index], path, sizeof path);
	snprintf(buf, len, "'%s'", path);
	return (buf);
}

/* Free the index and close the root. */
static void
imagefolder_close(struct dataset *ds)
{
	struct imagefolder	*f = ds->priv;

	if (f == NULL)
		return;
	if (f->rootfd != -1)
		close(f->rootfd);
	free(f->root);
	free(f->realroot);
	free(f->strtab);
	free(f->off);
	free(f->label);
	free(f);
	ds->priv = NULL;
}
