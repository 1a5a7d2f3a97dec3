/*
 * pktfs_direct.h: read pktfs files straight from the mapped image.
 *
 * A program on the same machine as a pktfs image maps it read-only and
 * reads files at memory speed, every byte checked against the CRC32C its
 * record carries, while the process holding the image (a mount or a
 * server) keeps serving. See docs/DIRECT.md for what this guarantees.
 *
 * Link with -lpktfs_direct. Every function is thread-safe. Functions that
 * fail return NULL or -1 and set errno (ENOENT, ENOTDIR, EISDIR, EIO for
 * damaged data, EREMOTE for a tiered range no holder can fetch, ESTALE for
 * a file deleted under its handle, EAGAIN, EACCES, ...);
 * pktfs_last_error() then describes the failure for a person.
 */
#ifndef PKTFS_DIRECT_H
#define PKTFS_DIRECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pktfs_image pktfs_image;
typedef struct pktfs_file pktfs_file;

/* How reads check records against their CRCs. */
enum pktfs_verify {
    PKTFS_VERIFY_HOLDER = 0, /* as the holder does (once, if none says) */
    PKTFS_VERIFY_ONCE = 1,   /* each record the first time this process reads it */
    PKTFS_VERIFY_ALWAYS = 2, /* every record on every read */
    PKTFS_VERIFY_OFF = 3,    /* never */
};

struct pktfs_stat {
    uint64_t ino;
    uint32_t mode; /* st_mode: type and permission bits */
    uint32_t nlink;
    uint32_t uid;
    uint32_t gid;
    uint64_t size;
    uint64_t blocks; /* 512-byte blocks */
    uint32_t blksize;
    uint32_t rdev;
    int64_t atime_ns;
    int64_t mtime_ns;
    int64_t ctime_ns;
};

/* A piece of a range lent by pktfs_read_with: `len` bytes at `data`, or
 * `len` zero bytes when `data` is NULL (a hole). */
struct pktfs_piece {
    const void *data;
    size_t len;
};

/* Open (map) the image file at `path`; only a user who may read the image
 * file can. `verify` is one of enum pktfs_verify. */
pktfs_image *pktfs_image_open(const char *path, int verify);
void pktfs_image_close(pktfs_image *image);

/* stat of a path inside the image (symlinks followed). */
int pktfs_stat(pktfs_image *image, const char *path, struct pktfs_stat *out);

/* Open a regular file of the image by its path, or by inode number. */
pktfs_file *pktfs_open(pktfs_image *image, const char *path);
pktfs_file *pktfs_open_ino(pktfs_image *image, uint64_t ino);
void pktfs_close(pktfs_file *file);

int pktfs_fstat(pktfs_file *file, struct pktfs_stat *out);

/* Read at most `len` bytes at `off`: the number read, 0 at the end of the
 * file, -1 on error. The bytes are the file's at one moment. */
ssize_t pktfs_pread(pktfs_file *file, void *buf, size_t len, uint64_t off);
ssize_t pktfs_preadv(pktfs_file *file, const struct iovec *iov, int iovcnt, uint64_t off);

/* Lend [off, off+len) to `cb` without a copy: `n` pieces, valid only while
 * `cb` runs (nothing writes them meanwhile). At most 64 MiB at once.
 * Returns what `cb` returned, or -1 (errno set) if the range could not be
 * lent. */
int pktfs_read_with(pktfs_file *file, uint64_t off, size_t len,
                    int (*cb)(const struct pktfs_piece *pieces, size_t n, void *arg),
                    void *arg);

/* The last failure on this thread, for a person (never NULL). */
const char *pktfs_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
