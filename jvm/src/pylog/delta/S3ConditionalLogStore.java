package pylog.delta;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import io.delta.storage.S3SingleDriverLogStore;

/**
 * delta-spark's log store for S3 with the store's conditional writes: a new commit file is written with
 * If-None-Match (Hadoop S3A's {@code fs.option.create.conditional.overwrite}), so of two writers of one
 * table version, in any processes or engines (delta-rs commits with the same header), exactly one succeeds
 * and the other gets the {@link java.nio.file.FileAlreadyExistsException} Delta's conflict checking expects.
 * Delta's own S3SingleDriverLogStore checks for the file and then writes it: safe within one Spark driver
 * only. Reading and listing are its. Overwrites (checkpoints, _last_checkpoint) are plain writes.
 */
public class S3ConditionalLogStore extends S3SingleDriverLogStore {
    /** Hadoop's create option for If-None-Match (Options.CreateFileOptionKeys, Hadoop 3.4.2 and later). */
    static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

    public S3ConditionalLogStore(Configuration initHadoopConf) {
        super(initHadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            try (FSDataOutputStream out = fs.create(path, true)) {
                writeLines(out, actions);
            }
            return;
        }
        FSDataOutputStream out;
        try {
            out = (FSDataOutputStream) fs.createFile(path).overwrite(false).must(CONDITIONAL_CREATE, true).build();
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            throw new java.nio.file.FileAlreadyExistsException(path.toString());
        }
        try {
            writeLines(out, actions);
            out.close();
        } catch (IOException e) {
            if (isPreconditionFailed(e)) {     // another writer put this version first
                throw new java.nio.file.FileAlreadyExistsException(path.toString());
            }
            throw e;
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;                          // an S3 object appears whole or not at all
    }

    private static void writeLines(FSDataOutputStream out, Iterator<String> actions) throws IOException {
        while (actions.hasNext()) {
            out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    /** S3A reports a failed If-None-Match as RemoteFileChangedException (HTTP 412) or FileAlreadyExists. */
    private static boolean isPreconditionFailed(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getSimpleName();
            if (name.equals("RemoteFileChangedException") || name.equals("FileAlreadyExistsException")
                    || String.valueOf(t.getMessage()).contains("412")) {
                return true;
            }
        }
        return false;
    }
}
