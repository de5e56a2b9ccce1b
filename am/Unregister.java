// Unregister this application attempt with YARN, with a final status.
//
// Run by am/unregister.py with the JDK's source launcher, on the classpath of
// skein's ApplicationMaster in the same container:
//   java -cp $CLASSPATH am/Unregister.java FAILED < diagnostics
// The attempt's AMRMToken (HADOOP_TOKEN_FILE_LOCATION) authenticates the call,
// as it does skein's own. Why: skein unregisters a FAILED or KILLED attempt
// only if it is YARN's last, and YARN starts another one otherwise.
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

public class Unregister {
  public static void main(String[] args) throws Exception {
    FinalApplicationStatus status = FinalApplicationStatus.valueOf(args[0]);
    ByteArrayOutputStream in = new ByteArrayOutputStream();
    System.in.transferTo(in);
    String diagnostics = in.toString(StandardCharsets.UTF_8);
    AMRMClient<AMRMClient.ContainerRequest> rm = AMRMClient.createAMRMClient();
    rm.init(new YarnConfiguration());
    rm.start();
    try {
      // Returns once the ResourceManager has stored the final state.
      rm.unregisterApplicationMaster(status, diagnostics, null);
    } finally {
      rm.stop();
    }
    System.out.println("unregistered " + status);
  }
}
