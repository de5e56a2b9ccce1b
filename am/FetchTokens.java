// Log in from the job's keytab and obtain fresh HDFS delegation tokens.
//
// Run by am/fetch_tokens.py with the JDK's source launcher, on the classpath
// of skein's ApplicationMaster in the same container:
//   java -cp $CLASSPATH am/FetchTokens.java PRINCIPAL KEYTAB OUT [hdfs://nn ...]
// Gets a token for fs.defaultFS and every URL given, renewable by the
// principal's own user, renews each once to learn when it expires, writes
// them to OUT (Hadoop's token file, Writable format) and prints one line per
// token: "token KIND SERVICE EXPIRES_MS". Why Java: Python has no Hadoop
// client that can ask a NameNode for delegation tokens (hdfs-native only uses
// them), and a job longer than their maximum lifetime needs fresh ones.
import java.io.File;
import java.net.URI;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;

public class FetchTokens {
  public static void main(String[] args) throws Exception {
    String principal = args[0];
    String keytab = args[1];
    File out = new File(args[2]);
    Configuration conf = new Configuration();
    conf.addResource("hdfs-site.xml");
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation ugi =
        UserGroupInformation.loginUserFromKeytabAndReturnUGI(principal, keytab);
    String renewer = ugi.getShortUserName();
    Credentials credentials = new Credentials();
    ugi.doAs((PrivilegedExceptionAction<Void>) () -> {
      FileSystem.get(conf).addDelegationTokens(renewer, credentials);
      for (int i = 3; i < args.length; i++) {
        FileSystem.get(URI.create(args[i]), conf).addDelegationTokens(renewer, credentials);
      }
      for (Token<?> token : credentials.getAllTokens()) {
        long expires = -1;
        try {
          expires = token.renew(conf);
        } catch (Exception exc) {
          System.err.println("could not renew " + token.getService() + ": " + exc);
        }
        System.out.println(
            "token " + token.getKind() + " " + token.getService() + " " + expires);
      }
      return null;
    });
    credentials.writeTokenStorageFile(
        new Path(out.getAbsoluteFile().toURI()), conf, Credentials.SerializedFormat.WRITABLE);
  }
}
