/*
 * pktfs_cat IMAGE PATH [--lend]: write a file of a pktfs image to standard
 * output, read straight from the mapped image with libpktfs_direct (by
 * copies with pktfs_pread, or with --lend by pktfs_read_with, no copy).
 *
 *   cc -I direct/include direct/examples/pktfs_cat.c -lpktfs_direct -o pktfs_cat
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pktfs_direct.h"

static int put(const struct pktfs_piece *pieces, size_t n, void *arg) {
    size_t *written = arg;
    static const char zeros[4096];
    for (size_t k = 0; k < n; k++) {
        size_t left = pieces[k].len;
        while (left > 0) {
            const void *from = pieces[k].data ? (const char *)pieces[k].data + (pieces[k].len - left) : zeros;
            size_t step = pieces[k].data ? left : (left < sizeof zeros ? left : sizeof zeros);
            if (fwrite(from, 1, step, stdout) != step)
                return -1;
            left -= step;
            *written += step;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--lend") != 0)) {
        fprintf(stderr, "usage: pktfs_cat IMAGE PATH [--lend]\n");
        return 2;
    }
    pktfs_image *img = pktfs_image_open(argv[1], PKTFS_VERIFY_HOLDER);
    if (!img) {
        fprintf(stderr, "pktfs_cat: %s (errno %d)\n", pktfs_last_error(), errno);
        return 1;
    }
    pktfs_file *f = pktfs_open(img, argv[2]);
    if (!f) {
        fprintf(stderr, "pktfs_cat: %s (errno %d)\n", pktfs_last_error(), errno);
        pktfs_image_close(img);
        return 1;
    }
    struct pktfs_stat st;
    if (pktfs_fstat(f, &st) != 0) {
        fprintf(stderr, "pktfs_cat: %s (errno %d)\n", pktfs_last_error(), errno);
        return 1;
    }
    int rc = 0;
    if (argc == 4) {
        size_t written = 0;
        for (uint64_t off = 0; off < st.size; off += written) {
            size_t want = st.size - off > (64u << 20) ? (64u << 20) : (size_t)(st.size - off);
            size_t before = written;
            written = 0;
            if (pktfs_read_with(f, off, want, put, &written) != 0) {
                fprintf(stderr, "pktfs_cat: %s (errno %d)\n", pktfs_last_error(), errno);
                rc = 1;
                break;
            }
            (void)before;
            if (written == 0)
                break;
        }
    } else {
        static char buf[1 << 16];
        uint64_t off = 0;
        ssize_t n;
        while ((n = pktfs_pread(f, buf, sizeof buf, off)) > 0) {
            if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) {
                rc = 1;
                break;
            }
            off += (uint64_t)n;
        }
        if (n < 0) {
            fprintf(stderr, "pktfs_cat: %s (errno %d)\n", pktfs_last_error(), errno);
            rc = 1;
        }
    }
    pktfs_close(f);
    pktfs_image_close(img);
    return rc;
}
